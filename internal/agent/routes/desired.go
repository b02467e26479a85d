package routes

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Peer is another node's pod CIDR and the address that node is reached at.
type Peer struct {
	// Node is the Node's name.
	Node string
	// PodCIDR is one of its IPv4 pod CIDRs.
	PodCIDR netip.Prefix
	// NodeIP is its InternalIP.
	NodeIP netip.Addr
}

// Peers are the (IPv4) pod CIDRs of every node but self with an InternalIP, restricted to
// cluster when it is valid, sorted by pod CIDR. A pod CIDR claimed by two nodes goes to
// the first by name (node IPAM never does that; it is logged by the caller when the
// returned conflicts are non-empty). Pure.
func Peers(self string, nodes []*corev1.Node, cluster netip.Prefix) (peers []Peer, conflicts []string) {
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	seen := map[netip.Prefix]string{}
	for _, n := range sorted {
		if n.Name == self || n.DeletionTimestamp != nil {
			continue
		}
		ip := internalIP(n)
		if !ip.IsValid() {
			continue
		}
		for _, c := range podCIDRs(n) {
			p, err := netip.ParsePrefix(c)
			if err != nil || !p.Addr().Is4() {
				continue
			}
			p = p.Masked()
			if cluster.IsValid() && !cluster.Overlaps(p) {
				continue
			}
			if other, ok := seen[p]; ok {
				conflicts = append(conflicts, p.String()+": "+other+" and "+n.Name)
				continue
			}
			seen[p] = n.Name
			peers = append(peers, Peer{Node: n.Name, PodCIDR: p, NodeIP: ip})
		}
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].PodCIDR.String() < peers[j].PodCIDR.String() })
	return peers, conflicts
}

func podCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

// internalIP is the node's first IPv4 InternalIP (invalid when none).
func internalIP(n *corev1.Node) netip.Addr {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
			return ip
		}
	}
	return netip.Addr{}
}

// Route is one kernel route this package keeps.
type Route struct {
	Dst     netip.Prefix
	Gateway netip.Addr
	Link    int
}

// Plan is what Sync does to go from have to want: the routes to write (new or changed)
// and the destinations to delete. Pure.
func Plan(have, want map[netip.Prefix]Route) (write []Route, remove []netip.Prefix) {
	for dst, r := range want {
		if h, ok := have[dst]; !ok || h != r {
			write = append(write, r)
		}
	}
	for dst := range have {
		if _, ok := want[dst]; !ok {
			remove = append(remove, dst)
		}
	}
	sort.Slice(write, func(i, j int) bool { return write[i].Dst.String() < write[j].Dst.String() })
	sort.Slice(remove, func(i, j int) bool { return remove[i].String() < remove[j].String() })
	return write, remove
}
