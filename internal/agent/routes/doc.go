// Package routes programs the routes between the nodes' pod networks, on each node by its
// own agent (the role flannel's host-gw backend or a cloud route controller plays).
//
// Job: from an informer on Nodes (the agent's client acts as the node; the Node authorizer
// lets a node list and watch every Node), for every OTHER node that has a pod CIDR
// (spec.podCIDRs, else spec.podCIDR) and an InternalIP, keep the kernel route
//
//	<podCIDR> via <nexthop> dev <link>
//
// where link and nexthop are how this node reaches that node's InternalIP (`ip route get
// <InternalIP>`): the InternalIP itself when it is on a link, else the gateway it is
// reached through. A node whose address is this node's own, or is reached through no
// interface, gets no route (logged). Only IPv4 pod CIDRs are programmed.
//
// Contract:
//   - Every route it writes carries rtnetlink protocol 0x4c ("L", Protocol), so a restarted
//     agent finds its previous routes: Sync replaces what changed, deletes what is no longer
//     wanted (a Node deleted, or its address or pod CIDR changed) and leaves the rest, so
//     restarts are gapless and idempotent.
//   - It manages only routes of that protocol whose destination lies inside
//     Options.ClusterCIDR (when set): two clusters' agents sharing a network namespace
//     (tests) never touch each other's routes.
//   - Cleanup removes every such route (kube agent --cleanup).
//   - Desired (the pure decision) is table-tested; Run re-syncs on every Node change and
//     every Options.Resync.
package routes
