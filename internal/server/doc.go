// Package server wires the whole control plane of `kube server` in one visible path:
// Options → Complete → Validate → New → Run(ctx). The command line and the in-process test
// fixture run exactly this path.
//
// Start order: etcd (embedded, or a client for --etcd-servers) → PKI → type registry and
// store → watch caches → API server (HTTPS) → bootstrap objects → controllers. Run returns
// when ctx ends, after stopping in reverse: controllers, then the HTTP server (in-flight
// requests drain, watches close), then the caches, then etcd.
package server
