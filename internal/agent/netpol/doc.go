// Package netpol enforces NetworkPolicy on one node for the pods that run there (issue 19,
// items 6–7), in the kernel, with nftables over netlink (github.com/google/nftables).
//
// The job splits in two:
//
//   - Compute (compute.go) is the pure decision: from the cluster's pods, namespaces and
//     NetworkPolicies it gives, for each local pod, the ingress and egress allow-lists with
//     upstream's semantics — podSelector, namespaceSelector, both, ipBlock with except,
//     ports with endPort, named ports (an ingress rule's against the target pod's container
//     ports, an egress rule's against each destination pod's), policyTypes (Ingress always,
//     Egress when the policy has egress rules), default deny by an empty rule list, allow-all
//     by an empty rule. A pod selected by no policy in a direction is unrestricted there; a pod
//     always reaches itself. The allow-lists name peer sets (one per policy rule, or per
//     policy rule and resolved named port), each a list of disjoint IPv4 intervals.
//     Evaluate is the same decision for one packet, used by the tests as the oracle of the
//     kernel rules.
//   - Table (nft.go) is the thin translation into ONE nftables table of ours (family ip,
//     default name kube-netpol): a forward-hook chain that accepts established and related
//     traffic, then jumps through the verdict map egress (source address of a local pod) and
//     ingress (destination address of a local pod) into one chain per local pod and
//     direction; each allow rule looks its peers up in a named interval set, and what no
//     rule allows is refused (TCP with a reset, the rest with ICMP administratively
//     prohibited), so a denied connection fails at once rather than timing out. Sync applies
//     the difference from the last applied Program in one netlink transaction: set elements
//     added and removed, a pod chain rewritten only when its rules change. The first Sync
//     (and any Sync after a failed one) replaces the whole table in one transaction, so a
//     restart never leaves a window without rules.
//
// Filtering sits in the forward hook, after the Service proxy's DNAT in prerouting, so a
// policy applies to traffic sent to a ClusterIP as to the pod IP. Pod-to-pod traffic on the
// node's bridge reaches that hook through br_netfilter (net.bridge.bridge-nf-call-iptables,
// which Controller sets). Traffic from the node itself (the agent's probes, host → pod)
// goes through the output hook and is never filtered, as upstream CNIs do; traffic from a
// pod to the node's own addresses (input hook) is not filtered either. This is upstream's
// documented rule ("traffic to and from the node where a Pod is running is always allowed,
// regardless of the IP address of the Pod or the node"): a pod selected by a default-deny
// policy still passes its kubelet probes, which test/services-net's TestShop checks (a
// backend pod replaced under a default-deny policy becomes Ready). Traffic from another
// node's address (a NodePort forwarded from there, a process on that node) is filtered as
// any other source.
//
// Controller (controller.go) runs it: informers on Pods, Namespaces and NetworkPolicies
// cluster-wide (the node's client may list and watch them), a recompute after any change
// that can matter (coalesced; a pod's status conditions do not), and Sync, retried with
// backoff when the kernel refuses. A pod is filtered from when its address reaches the API
// (status.podIP): its first moments are unfiltered, as with upstream CNIs that program
// from the API. Cleanup deletes the table (tests, `--cleanup`).
package netpol
