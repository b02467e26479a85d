// Package dns is the node agent's cluster DNS, the role CoreDNS plays on other clusters,
// run node-local as NodeLocal DNSCache is: every agent answers on the kube-dns Service's
// ClusterIP, which it puts as a /32 on an interface of its own, over UDP and TCP port 53.
//
// The pieces, each one idea:
//
//   - [Index] holds what the answers come from — Services, EndpointSlices and Namespaces,
//     fed by informers ([Watch]) and updated per object, never per query.
//   - [Resolver] answers names in the cluster zone as the Kubernetes DNS specification
//     (kubernetes/dns docs/specification.md) and CoreDNS's kubernetes plugin do: A/AAAA for
//     Services (ClusterIPs; ready endpoint addresses when headless, not-ready ones too with
//     publishNotReadyAddresses), A/AAAA for <hostname>.<service> endpoints, SRV for
//     _<port>._<proto>.<service>, CNAME for ExternalName, <a-b-c-d>.<ns>.pod (CoreDNS's
//     "pods insecure"), PTR for ClusterIPs and endpoint addresses, the dns-version TXT
//     record; NXDOMAIN for a name that does not exist, NODATA (NOERROR, no answer) for one
//     that exists without the asked type, both with the zone's SOA in the authority
//     section; TTL 5 s. It is pure: a message in, a message out.
//   - [Forwarder] recurses every other name to the upstream servers of the node's
//     resolv.conf, through a [Cache] that keeps answers for their TTL and negative
//     answers for their SOA's minimum.
//   - [Handler] chains them: the resolver, else the forwarder (an ExternalName's CNAME
//     chased to its target), then EDNS0 (the client's UDP size, else 512 bytes) and
//     truncation (TC) over UDP, counted with CoreDNS's metric names
//     (coredns_dns_requests_total, coredns_dns_responses_total{rcode},
//     coredns_dns_request_duration_seconds; [NewMetrics] registers them).
//   - [Listener] serves a Handler on one address over UDP (a few reading goroutines on
//     the bound socket; upstream-bound queries each in a goroutine) and TCP (miekg/dns's
//     server); [ServeMetrics] serves /metrics (the agent: on the DNS address, port 9153,
//     as CoreDNS).
//   - [Run] is what the agent runs: [Watch] feeding an Index, the address (the kube-dns
//     Service's ClusterIP, followed when it changes) on its link, a Listener and metrics.
//   - [EnsureAddress] and [RemoveLink] own the interface the address lives on (a dummy
//     link, else an empty bridge where the kernel has no dummy driver).
//
// Malformed packets with a query's header are answered FORMERR by the listener; every parsed query, however
// odd (huge names, ANY, unknown classes), gets an answer or a refusal, never a panic
// (fuzzed in fuzz_test.go).
package dns
