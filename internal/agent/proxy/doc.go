// Package proxy is the node agent's Service proxy: the role of kube-proxy in its nftables
// mode, programmed over netlink (github.com/google/nftables), inside `kube agent`.
//
// Job: from informers on Services and EndpointSlices (the agent's client acts as the node)
// it keeps ONE nftables table of its own (Options.Table, default "kube-proxy", family ip)
// such that, on this node:
//
//   - ClusterIP:port, every externalIP:port and NodePort on the node's addresses DNAT to a
//     ready endpoint chosen at random (numgen), with sessionAffinity ClientIP kept in a
//     per-endpoint timeout set;
//   - internalTrafficPolicy / externalTrafficPolicy Local use only this node's endpoints
//     (external traffic keeps its source address); terminating endpoints are used only as
//     upstream's fallback (k8s.io/kubernetes/pkg/proxy CategorizeEndpoints does the
//     choosing; the node's zone is not known to it, so zone hints are not applied);
//   - a Service port with no endpoints rejects new connections (a TCP reset for TCP, so a
//     connect fails with "connection refused" at once, also on the node itself; ICMP
//     port-unreachable otherwise); one whose endpoints exist but none may be used for the
//     policy drops them, as upstream;
//   - headless Services get nothing, ExternalName ones are left to DNS, and a Service
//     annotated kubeos.dev/node-local-dns: "true" is skipped (the node-local DNS answers on
//     that address itself);
//   - traffic from outside the cluster CIDR to a ClusterIP, all NodePort and externalIP
//     traffic of policy Cluster, and hairpin traffic (a pod reaching itself through its
//     Service) is masqueraded;
//   - UDP conntrack entries of endpoints that went away are deleted (upstream's
//     pkg/proxy/conntrack);
//   - net.ipv4.ip_forward=1 and net.bridge.bridge-nf-call-iptables=1 are set, and the
//     Service CIDR gets an `unreachable` route so an unprogrammed ClusterIP is refused
//     locally, never sent to the default gateway. Each programmed ClusterIP gets a /32
//     route on lo (protocol 0x4b, "K") so the node's own processes can connect to it (the
//     output hook's DNAT then reroutes the packet).
//
// With Options.APIServer (an API server listening on loopback only: kube server's default
// bind), the kubernetes Service's ClusterIP port https is DNATed to that loopback address
// instead of the endpoint the Service lists (the host's address, where nothing listens),
// so that pods and the node reach the API through it; the pod bridge (Options.Bridge) gets
// route_localnet, and the fixed chain loopback-guard (filter input) drops what arrives on
// the bridge for 127.0.0.0/8 without that DNAT (loopback.go).
//
// Changes are incremental: Services and EndpointSlices go through upstream's
// ServiceChangeTracker and EndpointsChangeTracker; a sync rebuilds the desired content of
// the changed Service ports only (pure: desired.go; each port's part is cached while its
// ServicePort and endpoints are the same objects, and merged into the whole incrementally),
// compares it with what was programmed (each chain's content, the elements of the maps) and
// sends only the differences, in one netlink transaction. The first sync after a start
// replaces whatever a previous run left in the table in one transaction too, so a restart
// after kill -9 never opens a gap: the kernel keeps forwarding on the old rules meanwhile.
//
// Endpoints are map elements, not rules: the kernel revalidates the whole table (every
// jump, every NAT expression reachable from the base chains: ~50 ms at 1,000 Services)
// whenever a transaction adds a rule with a jump, goto or NAT, but not for elements of a
// map without verdicts. So an endpoint replaced by another (the common churn) changes one
// element of its port's DNAT map and no rule; only a change of the endpoint count (the
// numgen modulus) or of the Service rewrites its chain. Session-affinity ports keep
// per-endpoint chains (the affinity sets need them).
//
// Rule layout (names as upstream's nftables mode, simplified):
//
//	filter-prerouting/-output (filter, before NAT): new connections to a Service port
//	    with no usable endpoint → vmap @no-endpoint-services / @no-endpoint-nodeports
//	    → reject-chain (reject) or drop
//	nat-prerouting/-output (dstnat) → services:
//	    ip daddr . meta l4proto . th dport vmap @service-ips       (ClusterIP, externalIPs)
//	    ip daddr <node IP> meta l4proto . th dport vmap @service-nodeports
//	int-<h> (ClusterIP): masquerade mark for off-cluster sources, goto svc-<h>
//	svc-<h> / svl-<h> (a Service port's cluster / local endpoints):
//	    meta l4proto P dnat ip to numgen random mod N map @epm-svc-<h>  {i: addr . port}
//	    or, with session affinity: affinity lookups, numgen random mod N vmap
//	    {i: goto ep-<h>}, and ep-<h>: hairpin mark, affinity update, dnat to IP:port
//	ext-<h> (externalIPs and NodePort): mark (policy Cluster) then goto svc-<h>, or for
//	    Local: pods and the node itself go to svc-<h>, others to svl-<h> (local endpoints)
//	nat-postrouting (srcnat): ip saddr . ip daddr @hairpin (a pod DNATed to itself) →
//	    mark; mark 0x4000 → masquerade
//
// Endpoints whose address no node should DNAT to (not a canonical IPv4 address, loopback,
// link-local, multicast, reserved, or inside the Service CIDR: endpoints.go) are left out
// of their slice, the rest of it programmed, and a Warning Event (IgnoredEndpointAddress)
// on the slice says so once per revision (Options.Recorder).
//
// New needs CAP_NET_ADMIN and nf_tables; without them (or with Options.Probe failing) it
// fails with ErrNoNFTables. There is no userspace fallback: the agent keeps the node's pods
// running, reports the node's ServiceProxyReady condition False (NFTablesUnavailable) and
// tries New again every few seconds. Cleanup removes the table and routes and turns the
// guarded bridge's route_localnet off (`kube agent --cleanup` and tests). Handler serves /debug/services (what is programmed,
// from which EndpointSlice resourceVersions); Metrics registers
// kubeproxy_sync_proxy_rules_duration_seconds and the programmed counts.
package proxy
