// Package agent is Kube's node agent (`kube agent`, and `kube server --agent` in the
// server's process): the kubelet's role over CRI v1.
//
// Agent.Run starts, in order: the runtime (its own supervised containerd from
// internal/agent/runtime, or --container-runtime-endpoint), the images a machine without a
// registry needs (the sandbox image made by internal/agent/images, then --image-dir), the
// Node registration, the pod network (internal/agent/cni: a conflist for the node's pod
// CIDR — node.spec.podCIDR from the server's node IPAM, else Options.PodCIDR — and the
// unreachable route for the cluster CIDR), the HTTPS API (internal/agent/server), the
// node status and Lease heartbeats, the pod manager (internal/agent/pods), and the
// eviction manager (internal/agent/eviction) over the node's measurements
// (internal/agent/stats), whose pressure becomes the MemoryPressure and DiskPressure
// conditions. It returns when ctx ends, stopping the containerd it started; running
// containers stay in their shims, and the next start adopts them — unless
// Options.ShutdownGracePeriod is set: then the node first reports NotReady and stops its
// pods, regular ones before critical ones, with the kubelet's graceful node shutdown status
// (shutdown.go).
//
// An agent joined with a bootstrap token (Bootstrap) renews its client certificate before
// it expires (RotatingConfig, the kubelet's certificate manager).
//
// The client (Options.Config) acts as the node, system:node:<name> in system:nodes, under
// the Node authorizer and NodeRestriction.
package agent
