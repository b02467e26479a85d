package netpoltest

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Case is one step: the policies that exist, the extra labels, and the expected matrix.
type Case struct {
	Name string
	// Upstream is the e2e test ("should …") whose intent the step ports.
	Upstream string
	Policies func(Env) []*networkingv1.NetworkPolicy
	// NamespaceLabels and PodLabels ("ns/pod") are added to the base labels.
	NamespaceLabels map[string]map[string]string
	PodLabels       map[string]map[string]string
	Expect          func(Env) *Reach
}

// Put records one probe's answer.
func (r *Reach) Put(from, to string, port int32, v bool) { r.m[key(from, to, port)] = v }

// Policy builders.

func np(ns, name string, pods metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: pods, PolicyTypes: types}}
}

func podSel(pod string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{"pod": pod}}
}

func labelsSel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func inSel(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func peerPods(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

func peerNS(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

func peerBoth(ns, pods *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: pods}
}

func peerIP(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func tcp(port int32) networkingv1.NetworkPolicyPort {
	p := corev1.ProtocolTCP
	v := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: &p, Port: &v}
}

func tcpRange(port, end int32) networkingv1.NetworkPolicyPort {
	p := tcp(port)
	p.EndPort = &end
	return p
}

func named(name string, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func protoOnly(proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: &proto}
}

func udp(port int32) networkingv1.NetworkPolicyPort {
	p := tcp(port)
	u := corev1.ProtocolUDP
	p.Protocol = &u
	return p
}

func ingress(p *networkingv1.NetworkPolicy, from []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) *networkingv1.NetworkPolicy {
	p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: from, Ports: ports})
	return p
}

func egress(p *networkingv1.NetworkPolicy, to []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) *networkingv1.NetworkPolicy {
	p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: to, Ports: ports})
	return p
}

func peers(p ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return p }

func list(p ...*networkingv1.NetworkPolicy) func(Env) []*networkingv1.NetworkPolicy {
	return func(Env) []*networkingv1.NetworkPolicy { return p }
}

func expect(f func(r *Reach)) func(Env) *Reach {
	return func(Env) *Reach { r := NewReach(true); f(r); return r }
}

var (
	all       = metav1.LabelSelector{}
	ingressT  = networkingv1.PolicyTypeIngress
	egressT   = networkingv1.PolicyTypeEgress
	tcpProto  = corev1.ProtocolTCP
	udpProto  = corev1.ProtocolUDP
	sctpProto = corev1.ProtocolSCTP
)

// hostCIDR is pod's address as a /32.
func hostCIDR(e Env, pod string) string { return netip.PrefixFrom(e.IP(pod), 32).String() }

// Cases are the steps, in order.
func Cases() []Case {
	return []Case{
		{Name: "no-policy", Upstream: "(baseline) a pod selected by no policy is unrestricted",
			Policies: list(), Expect: expect(func(r *Reach) {})},
		{Name: "default-deny-ingress", Upstream: "should support a 'default-deny-ingress' policy",
			Policies: list(np("x", "deny-ingress", all, ingressT)),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/*", false) })},
		{Name: "default-deny-all", Upstream: "should support a 'default-deny-all' policy",
			Policies: list(np("x", "deny-all", all, ingressT, egressT)),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/*", false); r.Set("x/*", "*", false) })},
		{Name: "allow-from-pod-in-namespace", Upstream: "should enforce policy to allow traffic from pods within server namespace based on PodSelector",
			Policies: list(ingress(np("x", "allow-x-b", podSel("a")), peers(peerPods(labelsSel("pod", "b"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("x/b", "x/a", true) })},
		{Name: "allow-ingress-for-target", Upstream: "should enforce policy to allow ingress traffic for a target",
			Policies: list(np("x", "deny-ingress", all, ingressT), ingress(np("x", "allow-to-a", podSel("a")), nil)),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/b", false); r.Set("*", "x/c", false) })},
		{Name: "allow-from-all-namespaces", Upstream: "should enforce policy to allow ingress traffic from pods in all namespaces",
			Policies: list(ingress(np("x", "allow-all-ns", podSel("a")), peers(peerNS(&metav1.LabelSelector{})))),
			Expect:   expect(func(r *Reach) {})},
		{Name: "allow-from-namespace", Upstream: "should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
			Policies: list(ingress(np("x", "allow-ns-y", podSel("a")), peers(peerNS(labelsSel("ns", "y"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/*", "x/a", true) })},
		{Name: "pod-match-expressions", Upstream: "should enforce policy based on PodSelector with MatchExpressions",
			Policies: list(ingress(np("x", "pod-expr", podSel("a")), peers(peerPods(inSel("pod", metav1.LabelSelectorOpIn, "b"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("x/b", "x/a", true) })},
		{Name: "namespace-match-expressions", Upstream: "should enforce policy based on NamespaceSelector with MatchExpressions",
			Policies: list(ingress(np("x", "ns-expr", podSel("a")), peers(peerNS(inSel("ns", metav1.LabelSelectorOpIn, "y"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/*", "x/a", true) })},
		{Name: "pod-or-namespace", Upstream: "should enforce policy based on PodSelector or NamespaceSelector",
			Policies: list(ingress(np("x", "pod-or-ns", podSel("a")), peers(peerNS(inSel("ns", metav1.LabelSelectorOpNotIn, "x")), peerPods(labelsSel("pod", "b"))))),
			Expect:   expect(func(r *Reach) { r.Set("x/c", "x/a", false) })},
		{Name: "pod-and-namespace", Upstream: "should enforce policy based on PodSelector and NamespaceSelector",
			Policies: list(ingress(np("x", "pod-and-ns", podSel("a")), peers(peerBoth(inSel("ns", metav1.LabelSelectorOpNotIn, "x"), labelsSel("pod", "b"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/b", "x/a", true); r.Set("z/b", "x/a", true) })},
		{Name: "multiple-pod-and-namespace-selectors", Upstream: "should enforce policy based on Multiple PodSelectors and NamespaceSelectors",
			Policies: list(ingress(np("x", "multi", podSel("a")), peers(peerBoth(inSel("ns", metav1.LabelSelectorOpNotIn, "x"), inSel("pod", metav1.LabelSelectorOpIn, "b", "c"))))),
			Expect: expect(func(r *Reach) {
				r.Set("*", "x/a", false)
				for _, f := range []string{"y/b", "y/c", "z/b", "z/c"} {
					r.Set(f, "x/a", true)
				}
			})},
		{Name: "any-pod-selector", Upstream: "should enforce policy based on any PodSelectors",
			Policies: list(ingress(np("x", "any-pod", podSel("a")), peers(peerPods(labelsSel("pod", "b")), peerPods(labelsSel("pod", "c"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("x/b", "x/a", true); r.Set("x/c", "x/a", true) })},
		{Name: "pod-in-other-namespace", Upstream: "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector",
			Policies: list(ingress(np("x", "y-a-only", podSel("a")), peers(peerBoth(labelsSel("ns", "y"), labelsSel("pod", "a"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/a", "x/a", true) })},
		{Name: "ports", Upstream: "should enforce policy based on Ports",
			Policies: list(ingress(np("x", "port-81", podSel("a")), peers(peerNS(labelsSel("ns", "y"))), tcp(81))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/*", "x/a", true, 81) })},
		{Name: "stacked-policies", Upstream: "should enforce multiple, stacked policies with overlapping podSelectors",
			Policies: list(ingress(np("x", "port-81", podSel("a")), peers(peerNS(labelsSel("ns", "y"))), tcp(81)),
				ingress(np("x", "port-80", podSel("a")), peers(peerNS(labelsSel("ns", "y"))), tcp(80))),
			Expect: expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/*", "x/a", true) })},
		{Name: "allow-all", Upstream: "should support allow-all policy",
			Policies: list(np("x", "deny-ingress", all, ingressT), ingress(np("x", "allow-all", all), peers())),
			Expect:   expect(func(r *Reach) {})},
		{Name: "named-port", Upstream: "should allow ingress access on one named port",
			Policies: list(ingress(np("x", "named", all), nil, named("serve-81-tcp", tcpProto))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/*", false, 80) })},
		{Name: "named-port-updated", Upstream: "should enforce updated policy",
			Policies: list(ingress(np("x", "named", all), nil, named("serve-80-tcp", tcpProto))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/*", false, 81) })},
		{Name: "named-port-from-namespace", Upstream: "should allow ingress access from namespace on one named port",
			Policies: list(ingress(np("x", "named-ns", all), peers(peerNS(labelsSel("ns", "y"))), named("serve-80-tcp", tcpProto))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/*", false); r.Set("y/*", "x/*", true, 80) })},
		{Name: "egress-named-port", Upstream: "should allow egress access on one named port",
			Policies: list(egress(np("x", "egress-named", all, egressT), nil, named("serve-80-tcp", tcpProto))),
			Expect:   expect(func(r *Reach) { r.Set("x/*", "*", false, 81) })},
		{Name: "named-port-unresolvable", Upstream: "should not allow all ports if it cannot limit to the requested port",
			Policies: list(ingress(np("x", "named-udp", podSel("a")), nil, named("serve-81-udp", udpProto))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false) })},
		{Name: "updated-namespace-before", Upstream: "should allow ingress access from updated namespace",
			Policies: list(ingress(np("x", "from-ns2", podSel("a")), peers(peerNS(labelsSel("ns2", "updated"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false) })},
		{Name: "updated-namespace-after", Upstream: "should allow ingress access from updated namespace",
			Policies:        list(ingress(np("x", "from-ns2", podSel("a")), peers(peerNS(labelsSel("ns2", "updated"))))),
			NamespaceLabels: map[string]map[string]string{"y": {"ns2": "updated"}},
			Expect:          expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/*", "x/a", true) })},
		{Name: "updated-pod-before", Upstream: "should allow ingress access from updated pod",
			Policies: list(ingress(np("x", "from-pod2", podSel("a")), peers(peerBoth(&metav1.LabelSelector{}, labelsSel("pod2", "updated"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false) })},
		{Name: "updated-pod-after", Upstream: "should allow ingress access from updated pod",
			Policies:  list(ingress(np("x", "from-pod2", podSel("a")), peers(peerBoth(&metav1.LabelSelector{}, labelsSel("pod2", "updated"))))),
			PodLabels: map[string]map[string]string{"z/b": {"pod2": "updated"}},
			Expect:    expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("z/b", "x/a", true) })},
		{Name: "deny-other-namespaces", Upstream: "should deny ingress from pods on other namespaces",
			Policies: list(ingress(np("x", "same-ns", all), peers(peerPods(&metav1.LabelSelector{})))),
			Expect:   expect(func(r *Reach) { r.Set("y/*", "x/*", false); r.Set("z/*", "x/*", false) })},
		{Name: "deny-updated-pod", Upstream: "should deny ingress access to updated pod",
			Policies:  list(np("x", "deny-isolated", metav1.LabelSelector{MatchLabels: map[string]string{"target": "isolated"}}, ingressT)),
			PodLabels: map[string]map[string]string{"x/a": {"target": "isolated"}},
			Expect:    expect(func(r *Reach) { r.Set("*", "x/a", false) })},
		{Name: "deny-egress-pod", Upstream: "should deny egress from pods based on PodSelector",
			Policies: list(np("x", "deny-egress-a", podSel("a"), egressT)),
			Expect:   expect(func(r *Reach) { r.Set("x/a", "*", false) })},
		{Name: "deny-egress-namespace", Upstream: "should deny egress from all pods in a namespace",
			Policies: list(np("x", "deny-egress", all, egressT)),
			Expect:   expect(func(r *Reach) { r.Set("x/*", "*", false) })},
		{Name: "ingress-and-egress", Upstream: "should work with Ingress, Egress specified together",
			Policies: list(egress(ingress(np("x", "both", podSel("a"), ingressT, egressT), peers(peerPods(labelsSel("pod", "b")))), peers(peerNS(labelsSel("ns", "y"))), tcp(80))),
			Expect: expect(func(r *Reach) {
				r.Set("*", "x/a", false)
				r.Set("x/b", "x/a", true)
				r.Set("x/a", "*", false)
				r.Set("x/a", "y/*", true, 80)
			})},
		{Name: "egress-denied-client-side", Upstream: "should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)",
			Policies: list(egress(np("x", "egress-y", podSel("a"), egressT), peers(peerNS(labelsSel("ns", "y")))),
				ingress(np("z", "allow-all", all), peers())),
			Expect: expect(func(r *Reach) { r.Set("x/a", "*", false); r.Set("x/a", "y/*", true) })},
		{Name: "egress-pod-and-namespace", Upstream: "should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector",
			Policies: list(egress(np("x", "egress-y-a", podSel("a"), egressT), peers(peerBoth(labelsSel("ns", "y"), labelsSel("pod", "a"))))),
			Expect:   expect(func(r *Reach) { r.Set("x/a", "*", false); r.Set("x/a", "y/a", true) })},
		{Name: "any-port-on-protocol", Upstream: "should enforce ingress policy allowing any port traffic to a server on a specific protocol",
			Policies: list(ingress(np("x", "tcp-any", podSel("a")), nil, protoOnly(tcpProto))),
			Expect:   expect(func(r *Reach) {})},
		{Name: "ingress-allow-all-precedence", Upstream: "should enforce multiple ingress policies with ingress allow-all policy taking precedence",
			Policies: list(ingress(np("x", "port-80", podSel("a")), nil, tcp(80)), ingress(np("x", "allow-all", all), peers())),
			Expect:   expect(func(r *Reach) {})},
		{Name: "egress-allow-all-precedence", Upstream: "should enforce multiple egress policies with egress allow-all policy taking precedence",
			Policies: list(egress(np("x", "egress-80", podSel("a"), egressT), nil, tcp(80)), egress(np("x", "egress-all", all, egressT), nil)),
			Expect:   expect(func(r *Reach) {})},
		{Name: "policies-deleted", Upstream: "should stop enforcing policies after they are deleted",
			Policies: list(), Expect: expect(func(r *Reach) {})},
		{Name: "egress-cidr", Upstream: "should allow egress access to server in CIDR block",
			Policies: func(e Env) []*networkingv1.NetworkPolicy {
				return []*networkingv1.NetworkPolicy{egress(np("x", "egress-cidr", podSel("a"), egressT), peers(peerIP(hostCIDR(e, "y/b"))))}
			},
			Expect: expect(func(r *Reach) { r.Set("x/a", "*", false); r.Set("x/a", "y/b", true) })},
		{Name: "egress-cidr-except", Upstream: "should enforce except clause while egress access to server in CIDR block",
			Policies: func(e Env) []*networkingv1.NetworkPolicy {
				return []*networkingv1.NetworkPolicy{egress(np("x", "egress-cidr", podSel("a"), egressT), peers(peerIP(e.PodCIDR.Masked().String(), hostCIDR(e, "y/b"))))}
			},
			Expect: expect(func(r *Reach) { r.Set("x/a", "y/b", false) })},
		{Name: "cidr-and-except-overlap", Upstream: "should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
			Policies: func(e Env) []*networkingv1.NetworkPolicy {
				return []*networkingv1.NetworkPolicy{
					egress(np("x", "egress-cidr", podSel("a"), egressT), peers(peerIP(e.PodCIDR.Masked().String(), hostCIDR(e, "y/b")))),
					egress(np("x", "egress-y-b", podSel("a"), egressT), peers(peerIP(hostCIDR(e, "y/b")))),
				}
			},
			Expect: expect(func(r *Reach) {})},
		{Name: "ingress-egress-independent", Upstream: "should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector",
			Policies: list(np("x", "deny-egress-a", podSel("a"), egressT), ingress(np("x", "allow-b-from-a", podSel("b")), peers(peerPods(labelsSel("pod", "a"))))),
			Expect: expect(func(r *Reach) {
				r.Set("x/a", "*", false)
				r.Set("*", "x/b", false)
			})},
		{Name: "sctp-not-tcp", Upstream: "should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP'",
			Policies: list(ingress(np("x", "sctp-81", podSel("a")), nil, networkingv1.NetworkPolicyPort{Protocol: &sctpProto, Port: ptrPort(81)})),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false) })},
		{Name: "udp-not-tcp", Upstream: "should not allow access by TCP when a policy specifies only UDP",
			Policies: list(ingress(np("x", "udp-81", podSel("a")), nil, udp(81))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false) })},
		{Name: "default-namespace-label", Upstream: "should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label",
			Policies: list(ingress(np("x", "metadata-name", podSel("a")), peers(peerNS(labelsSel("kubernetes.io/metadata.name", "y"))))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/a", false); r.Set("y/*", "x/a", true) })},
		{Name: "default-namespace-label-expressions", Upstream: "should enforce policy based on NamespaceSelector with MatchExpressions using default ns label",
			Policies: list(egress(np("x", "metadata-name-egress", podSel("a"), egressT), peers(peerNS(inSel("kubernetes.io/metadata.name", metav1.LabelSelectorOpNotIn, "y"))))),
			Expect:   expect(func(r *Reach) { r.Set("x/a", "y/*", false) })},
		{Name: "end-port", Upstream: "(ports with endPort) an 80-81 range and an 81-90 range",
			Policies: list(ingress(np("x", "range-a", podSel("a")), nil, tcpRange(80, 81)), ingress(np("x", "range-b", podSel("b")), nil, tcpRange(81, 90))),
			Expect:   expect(func(r *Reach) { r.Set("*", "x/b", false, 80) })},
		{Name: "egress-end-port-to-namespace", Upstream: "(ports with endPort) egress to a namespace on a range",
			Policies: list(egress(np("y", "egress-range", all, egressT), peers(peerNS(labelsSel("ns", "z"))), tcpRange(79, 80))),
			Expect:   expect(func(r *Reach) { r.Set("y/*", "*", false); r.Set("y/*", "z/*", true, 80) })},
	}
}

func ptrPort(p int32) *intstr.IntOrString { v := intstr.FromInt32(p); return &v }
