// Package nodeipam is the node IPAM controller with upstream's range allocator: each Node
// without spec.podCIDR(s) gets the next free /MaskSize block (one per family on dual-stack)
// of the cluster CIDR (--cluster-cidr, default 10.244.0.0/16, /24 blocks), blocks already
// held by nodes are marked used on start, a deleted node's blocks are released, and a full
// range is reported with a CIDRNotAvailable event. The node agent reads its pod network from
// node.spec.podCIDR. It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/nodeipam,
// kube-controller-manager's node-ipam-controller with --allocate-node-cidrs) over the API
// with client-go informers and its own identity, on the holder of the
// kube-system/kube-node-ipam-controller Lease.
//
// ParseConfig is the pure part: flags in, CIDRs and mask sizes out, refused as
// kube-controller-manager refuses them.
package nodeipam
