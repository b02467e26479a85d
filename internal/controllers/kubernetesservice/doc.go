// Package kubernetesservice keeps the default/kubernetes Service and its endpoints: the
// Service (cluster IP the first address of --service-cluster-ip-range, port 443 named https)
// is created when missing, and its Endpoints and EndpointSlices list every live `kube
// server` with its address and secure port.
//
// It is upstream's lease endpoint reconciler (k8s.io/kubernetes
// pkg/controlplane/reconcilers/lease.go) with Lease objects instead of etcd TTL keys: every
// server runs it (no leader election: each server must add itself) and renews its own
// Lease in kube-system every 10 s — named apiserver-<hash of its identity>, labelled
// apiserver.kubernetes.io/identity=kube-apiserver as upstream's identity Leases, with its
// address:port in the kubernetes.io/peer-advertise-address annotation and a 15 s duration
// (upstream's endpoint TTL). Each pass rewrites the Endpoints and EndpointSlices from the
// Leases that have not expired, so a server that dies drops out within about 25 s, and one
// that stops deletes its Lease and removes itself at once. Expired Leases are deleted.
//
// The objects are upstream's: the Endpoints "kubernetes" carries
// endpointslice.kubernetes.io/skip-mirror=true and one subset per port (one in all when the
// servers share a port, as upstream writes it); the
// EndpointSlice "kubernetes" carries kubernetes.io/service-name=kubernetes (and, as
// upstream's, no managed-by label). An EndpointSlice has one port list, so servers on
// another port than the first (several servers on one host) are listed in further slices
// "kubernetes-ipv4-<port>" with the same label; clients that follow a Service's slices by
// label (kube-proxy, CoreDNS) see them all.
//
// Addresses: the advertise address, else the bind address unless it is a wildcard or
// loopback, else the host's default interface address (PublicAddress), as upstream:
// Endpoints may not hold loopback addresses.
//
// The decisions (which Leases are live, the desired Endpoints and slices) are pure functions
// in kubernetesservice_reconcile.go; the controller is the I/O around them.
package kubernetesservice
