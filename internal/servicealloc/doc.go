// Package servicealloc allocates the cluster IPs and node ports of core/v1 Services, as
// kube-apiserver v1.37 does, and repairs the allocations after a crash.
//
// The decisions are upstream's own code, imported, not retyped:
//
//   - [Allocator.BeginCreate], [Allocator.BeginUpdate] and [Allocator.AfterDelete] are the
//     hooks of upstream's Service REST storage (k8s.io/kubernetes
//     pkg/registry/core/service/storage: alloc.go), called on the Service converted to the
//     internal type: ipFamilyPolicy and ipFamilies defaulted from the cluster's ranges
//     (single-stack of the primary family unless asked; IPv6 refused with 422 when only
//     IPv4 is configured), clusterIP/clusterIPs allocated or the chosen one reserved (422
//     "provided IP is already allocated" or "not in the valid range"), nothing for headless
//     or ExternalName Services, node ports for NodePort and LoadBalancer Services
//     (allocateLoadBalancerNodePorts honoured) and healthCheckNodePort for
//     externalTrafficPolicy Local load balancers, allocations carried over on update
//     (patchAllocatedValues) and released on a type change or delete. The registry's
//     [registry.Allocator] contract maps onto upstream's BeginCreate/BeginUpdate finish
//     functions one to one. That REST's own store is never used (refusedStorage).
//   - Cluster IPs are IPAddress objects (networking.k8s.io/v1), created through the API by
//     upstream's ipallocator.MetaAllocator over a loopback client and informers; creating
//     the IPAddress is the reservation, so two Services never get one address, whatever
//     server they are created on and however the servers crash. The ServiceCIDR
//     "kubernetes" for the configured ranges is created at start by upstream's default
//     ServiceCIDR controller.
//   - Node ports are upstream's portallocator over a bitmap stored in etcd under
//     [NodePortsKey] (upstream's key and RangeAllocation object): every allocation and
//     release is a compare-and-swap of the bitmap (rangeStore, the equivalent of upstream's
//     allocator/storage.Etcd over Kube's storage), so it is safe across servers and crashes.
//   - Repair: upstream's RepairIPAddress (an IPAddress whose Service is gone is deleted
//     after 60 s; a Service whose IP has no IPAddress gets one; duplicates and out-of-range
//     IPs are reported as events) and upstream's node port repair (rebuilds the bitmap from
//     the Services; a port held by no Service is freed after three passes) run at start and
//     every [Config.RepairInterval] on every server, as in kube-apiserver.
//
// A kill -9 between a reservation and the Service write therefore leaves at worst a leaked
// IPAddress or port, which repair frees; never a duplicate.
//
// Ranges: --service-cluster-ip-range defaults to [DefaultServiceClusterIPRange] (10.96.0.0/12,
// kubeadm's default, instead of upstream's 254-address 10.0.0.0/24); its first address is the
// default/kubernetes Service's. --service-node-port-range defaults to 30000-32767.
//
// Use: build with [New] when the registry is built (the Service kind's Allocator), run
// [Allocator.Start] once the server serves, and report ready after [Allocator.Ready].
package servicealloc
