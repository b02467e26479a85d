package netpol

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Pod is what Compute needs of a pod.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	// IP is the pod's IPv4 address (pods without one are left out).
	IP netip.Addr
	// Ports are its containers' ports (for named ports).
	Ports []corev1.ContainerPort
	// Local: it runs on this node (its traffic is filtered here).
	Local bool
}

// State is the cluster as Compute sees it.
type State struct {
	Pods []Pod
	// Namespaces maps each namespace to its labels.
	Namespaces map[string]map[string]string
	Policies   []*networkingv1.NetworkPolicy
}

// PortRange is an inclusive destination port range of one protocol; 0-65535 is any port.
type PortRange struct {
	Protocol    corev1.Protocol
	First, Last uint16
}

// AnyPort reports whether the range is every port of its protocol.
func (p PortRange) AnyPort() bool { return p.First == 0 && p.Last == 65535 }

// Rule allows traffic with a peer in Set ("" is any peer) to one of Ports (none: any
// port and protocol).
type Rule struct {
	Set   string
	Ports []PortRange
}

// Chain is one direction's allow-list of a pod isolated in that direction: what no rule
// allows is refused.
type Chain struct {
	Rules []Rule
}

// PodProgram is one local pod's filtering; a nil direction is unrestricted.
type PodProgram struct {
	// Pod is namespace/name (for messages).
	Pod             string
	Ingress, Egress *Chain
}

// Program is the node's whole filtering: the peer sets by name, and the local pods'
// chains by pod IP.
type Program struct {
	Sets map[string][]Interval
	Pods map[netip.Addr]PodProgram
}

// PolicyTypes is the policy's directions with upstream's default: Ingress, plus Egress
// when it has egress rules.
func PolicyTypes(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// Compute is the node's Program for state. Pure. Policies whose selectors do not parse
// are reported in the returned errors and left out (their pods stay as the other
// policies make them).
func Compute(s State) (Program, []error) {
	prog := Program{Sets: map[string][]Interval{}, Pods: map[netip.Addr]PodProgram{}}
	var errs []error
	pods := make([]Pod, 0, len(s.Pods))
	for _, p := range s.Pods {
		if p.IP.Is4() {
			pods = append(pods, p)
		}
	}
	policies := append([]*networkingv1.NetworkPolicy(nil), s.Policies...)
	sort.Slice(policies, func(i, j int) bool {
		a, b := policies[i], policies[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	ix := index{all: pods, byNS: map[string][]Pod{}}
	for _, p := range pods {
		ix.byNS[p.Namespace] = append(ix.byNS[p.Namespace], p)
	}
	for _, pol := range policies {
		if err := computePolicy(&prog, s, ix, pol); err != nil {
			errs = append(errs, fmt.Errorf("netpol: policy %s/%s: %w", pol.Namespace, pol.Name, err))
		}
	}
	return prog, errs
}

// index is the pods with an address, all and by namespace.
type index struct {
	all  []Pod
	byNS map[string][]Pod
}

// computePolicy adds one policy's chains and sets to prog (nothing when it fails).
func computePolicy(prog *Program, s State, ix index, pol *networkingv1.NetworkPolicy) error {
	sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
	if err != nil {
		return err
	}
	var targets []Pod
	for _, p := range ix.byNS[pol.Namespace] {
		if p.Local && sel.Matches(labels.Set(p.Labels)) {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	ingress, egress := PolicyTypes(pol)
	sets := map[string][]Interval{}
	type built struct {
		dir   string
		rules func(target Pod) []Rule
	}
	var dirs []built
	if ingress {
		var per []func(Pod) []Rule
		for i, r := range pol.Spec.Ingress {
			set, _, err := peerSet(sets, s, ix, pol, fmt.Sprintf("in%d", i), r.From)
			if err != nil {
				return err
			}
			ports := r.Ports
			per = append(per, func(t Pod) []Rule { return ingressRules(set, ports, t) })
		}
		dirs = append(dirs, built{"in", func(t Pod) []Rule {
			var out []Rule
			for _, f := range per {
				out = append(out, f(t)...)
			}
			return out
		}})
	}
	if egress {
		var rules []Rule
		for i, r := range pol.Spec.Egress {
			key := fmt.Sprintf("eg%d", i)
			set, peerPods, err := peerSet(sets, s, ix, pol, key, r.To)
			if err != nil {
				return err
			}
			rules = append(rules, egressRules(sets, pol, key, set, peerPods, r.Ports)...)
		}
		dirs = append(dirs, built{"eg", func(Pod) []Rule { return rules }})
	}
	for name, ivs := range sets {
		prog.Sets[name] = ivs
	}
	for _, t := range targets {
		pp := prog.Pods[t.IP]
		pp.Pod = t.Namespace + "/" + t.Name
		for _, d := range dirs {
			c := &pp.Ingress
			if d.dir == "eg" {
				c = &pp.Egress
			}
			if *c == nil {
				*c = &Chain{}
			}
			(*c).Rules = append((*c).Rules, d.rules(t)...)
		}
		prog.Pods[t.IP] = pp
	}
	return nil
}

// setName is the nftables set name of a policy rule's peers (readable when short).
func setName(pol *networkingv1.NetworkPolicy, key string) string {
	n := pol.Namespace + "/" + pol.Name + "/" + key
	if len(n) <= 200 {
		return n
	}
	h := sha256.Sum256([]byte(n))
	return fmt.Sprintf("%s/%x", key, h[:12])
}

// peerSet records the set of a rule's peers in sets and returns its name ("" when the
// rule has no peers: any peer) and the pods among them (all pods when any).
func peerSet(sets map[string][]Interval, s State, ix index, pol *networkingv1.NetworkPolicy, key string, peers []networkingv1.NetworkPolicyPeer) (string, []Pod, error) {
	if len(peers) == 0 {
		return "", ix.all, nil
	}
	var ivs []Interval
	var matched []Pod
	seen := map[netip.Addr]bool{}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			b, err := ipBlockIntervals(peer.IPBlock)
			if err != nil {
				return "", nil, err
			}
			ivs = append(ivs, b...)
			for _, p := range ix.all {
				if contains(b, addrU32(p.IP)) && !seen[p.IP] {
					seen[p.IP] = true
					matched = append(matched, p)
				}
			}
			continue
		}
		if peer.PodSelector == nil && peer.NamespaceSelector == nil {
			continue
		}
		var podSel, nsSel labels.Selector
		var err error
		if peer.PodSelector != nil {
			if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
				return "", nil, err
			}
		}
		if peer.NamespaceSelector != nil {
			if nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
				return "", nil, err
			}
		}
		candidates := ix.byNS[pol.Namespace]
		if nsSel != nil {
			candidates = nil
			for ns, l := range s.Namespaces {
				if nsSel.Matches(labels.Set(l)) {
					candidates = append(candidates, ix.byNS[ns]...)
				}
			}
		}
		for _, p := range candidates {
			if podSel != nil && !podSel.Matches(labels.Set(p.Labels)) {
				continue
			}
			ivs = append(ivs, hostInterval(p.IP))
			if !seen[p.IP] {
				seen[p.IP] = true
				matched = append(matched, p)
			}
		}
	}
	name := setName(pol, key)
	sets[name] = normalize(ivs)
	return name, matched, nil
}

// ipBlockIntervals is the CIDR minus its excepts.
func ipBlockIntervals(b *networkingv1.IPBlock) ([]Interval, error) {
	p, err := parseIPv4Prefix(b.CIDR)
	if err != nil {
		return nil, err
	}
	var cut []Interval
	for _, e := range b.Except {
		ep, err := parseIPv4Prefix(e)
		if err != nil {
			return nil, err
		}
		cut = append(cut, prefixInterval(ep))
	}
	return subtract([]Interval{prefixInterval(p)}, cut), nil
}

func protocolOf(p *corev1.Protocol) corev1.Protocol {
	if p == nil || *p == "" {
		return corev1.ProtocolTCP
	}
	return *p
}

// numericRange is a port entry without a named port as a range (ok false for a named one).
func numericRange(np networkingv1.NetworkPolicyPort) (PortRange, bool) {
	proto := protocolOf(np.Protocol)
	if np.Port == nil {
		return PortRange{proto, 0, 65535}, true
	}
	if np.Port.Type != 0 {
		return PortRange{}, false
	}
	first := uint16(np.Port.IntVal)
	last := first
	if np.EndPort != nil && *np.EndPort >= np.Port.IntVal {
		last = uint16(*np.EndPort)
	}
	return PortRange{proto, first, last}, true
}

// namedPort is the number the pod gives the named port of protocol proto (0: none).
func namedPort(p Pod, name string, proto corev1.Protocol) uint16 {
	for _, cp := range p.Ports {
		if cp.Name == name && protocolOf(&cp.Protocol) == proto {
			return uint16(cp.ContainerPort)
		}
	}
	return 0
}

// ingressRules is one ingress rule for target t: named ports resolve against t's container
// ports; a rule whose ports all fail to resolve allows nothing.
func ingressRules(set string, ports []networkingv1.NetworkPolicyPort, t Pod) []Rule {
	if len(ports) == 0 {
		return []Rule{{Set: set}}
	}
	var prs []PortRange
	for _, np := range ports {
		if pr, ok := numericRange(np); ok {
			prs = append(prs, pr)
			continue
		}
		proto := protocolOf(np.Protocol)
		if n := namedPort(t, np.Port.StrVal, proto); n != 0 {
			prs = append(prs, PortRange{proto, n, n})
		}
	}
	if len(prs) == 0 {
		return nil
	}
	return []Rule{{Set: set, Ports: prs}}
}

// egressRules is one egress rule: the numeric ports against the rule's peer set, and each
// named port against a set of the peer pods that declare it, one per port number.
func egressRules(sets map[string][]Interval, pol *networkingv1.NetworkPolicy, key, set string, peerPods []Pod, ports []networkingv1.NetworkPolicyPort) []Rule {
	if len(ports) == 0 {
		return []Rule{{Set: set}}
	}
	var out []Rule
	var numeric []PortRange
	for _, np := range ports {
		if pr, ok := numericRange(np); ok {
			numeric = append(numeric, pr)
			continue
		}
		proto := protocolOf(np.Protocol)
		byNum := map[uint16][]Interval{}
		for _, p := range peerPods {
			if n := namedPort(p, np.Port.StrVal, proto); n != 0 {
				byNum[n] = append(byNum[n], hostInterval(p.IP))
			}
		}
		nums := make([]int, 0, len(byNum))
		for n := range byNum {
			nums = append(nums, int(n))
		}
		sort.Ints(nums)
		for _, n := range nums {
			name := setName(pol, fmt.Sprintf("%s/%s/%s/%d", key, np.Port.StrVal, proto, n))
			sets[name] = normalize(byNum[uint16(n)])
			out = append(out, Rule{Set: name, Ports: []PortRange{{proto, uint16(n), uint16(n)}}})
		}
	}
	if len(numeric) > 0 {
		out = append([]Rule{{Set: set, Ports: numeric}}, out...)
	}
	return out
}

// Evaluate reports whether Program lets a packet from src to dst (protocol, destination
// port) start a connection: the source pod's egress chain and the destination pod's
// ingress chain must both allow it (when they are local and isolated); a pod reaches
// itself. Pure — the oracle of what the nftables rules do.
func Evaluate(prog Program, src, dst netip.Addr, proto corev1.Protocol, port uint16) bool {
	if src == dst {
		return true
	}
	if pp, ok := prog.Pods[src]; ok && pp.Egress != nil && !allows(prog, pp.Egress, dst, proto, port) {
		return false
	}
	if pp, ok := prog.Pods[dst]; ok && pp.Ingress != nil && !allows(prog, pp.Ingress, src, proto, port) {
		return false
	}
	return true
}

func allows(prog Program, c *Chain, peer netip.Addr, proto corev1.Protocol, port uint16) bool {
	for _, r := range c.Rules {
		if r.Set != "" && !contains(prog.Sets[r.Set], addrU32(peer)) {
			continue
		}
		if len(r.Ports) == 0 {
			return true
		}
		for _, pr := range r.Ports {
			if pr.Protocol == proto && port >= pr.First && port <= pr.Last {
				return true
			}
		}
	}
	return false
}
