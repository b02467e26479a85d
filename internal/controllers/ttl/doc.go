// Package ttl is the TTL controller: it annotates every Node with
// node.alpha.kubernetes.io/ttl, the number of seconds a kubelet may cache Secrets and
// ConfigMaps, growing with the cluster's size (0 up to 100 nodes, 15 s to 500, 30 s to
// 1000, 60 s to 2000, 300 s beyond). It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/ttl, kube-controller-manager's ttl-controller) over the
// API with client-go informers and its own identity, on the holder of the
// kube-system/kube-ttl-controller Lease.
package ttl
