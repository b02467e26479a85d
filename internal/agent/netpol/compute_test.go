package netpol

import (
	"fmt"
	"maps"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubeos.dev/kube/internal/agent/netpol/netpoltest"
)

// modelState is the e2e model with the case's labels, every pod local (or, when local is
// set, only those), addresses 10.9.0.1…
func modelState(c netpoltest.Case, env netpoltest.Env, local func(string) bool) State {
	s := State{Namespaces: map[string]map[string]string{}}
	for _, ns := range netpoltest.Namespaces {
		l := netpoltest.NamespaceLabels(ns)
		maps.Copy(l, c.NamespaceLabels[ns])
		s.Namespaces[ns] = l
	}
	for _, name := range netpoltest.AllPods() {
		ns, pod := name[:1], name[2:]
		l := netpoltest.PodLabels(pod)
		maps.Copy(l, c.PodLabels[name])
		s.Pods = append(s.Pods, Pod{Namespace: ns, Name: pod, Labels: l, IP: env.IP(name), Ports: netpoltest.ContainerPorts(), Local: local(name)})
	}
	s.Policies = c.Policies(env)
	return s
}

func modelEnv() netpoltest.Env {
	ips := map[string]netip.Addr{}
	a := netip.MustParseAddr("10.9.0.1")
	for _, p := range netpoltest.AllPods() {
		ips[p] = a
		a = a.Next()
	}
	return netpoltest.Env{IP: func(p string) netip.Addr { return ips[p] }, PodCIDR: netip.MustParsePrefix("10.9.0.0/24")}
}

// evaluateMatrix is what Evaluate says for every pair and port.
func evaluateMatrix(progs []Program, env netpoltest.Env) *netpoltest.Reach {
	got := netpoltest.NewReach(true)
	for _, f := range netpoltest.AllPods() {
		for _, t := range netpoltest.AllPods() {
			for _, port := range netpoltest.Ports {
				ok := true
				for _, prog := range progs {
					ok = ok && Evaluate(prog, env.IP(f), env.IP(t), corev1.ProtocolTCP, uint16(port))
				}
				got.Put(f, t, port, ok)
			}
		}
	}
	return got
}

// TestUpstreamMatrix: each e2e case's expected matrix, from one node holding every pod and
// from three nodes (one per namespace: a packet must pass the source node's egress and the
// destination node's ingress).
func TestUpstreamMatrix(t *testing.T) {
	env := modelEnv()
	cases := netpoltest.Cases()
	if len(cases) < 25 {
		t.Fatalf("%d cases, want at least 25", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want := c.Expect(env)
			one, errs := Compute(modelState(c, env, func(string) bool { return true }))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			var nodes []Program
			for _, ns := range netpoltest.Namespaces {
				p, errs := Compute(modelState(c, env, func(pod string) bool { return pod[:1] == ns }))
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				nodes = append(nodes, p)
			}
			for name, progs := range map[string][]Program{"one node": {one}, "three nodes": nodes} {
				got := evaluateMatrix(progs, env)
				if d := want.Diff(got); len(d) > 0 {
					t.Errorf("%s (%s): %d differences:\n%v\nexpected:\n%s%s\ngot:\n%s%s", name, c.Upstream, len(d), d,
						want.Table(80), want.Table(81), got.Table(80), got.Table(81))
				}
			}
		})
	}
}

func TestIntervals(t *testing.T) {
	p := func(s string) Interval { return prefixInterval(netip.MustParsePrefix(s)) }
	h := func(s string) Interval { return hostInterval(netip.MustParseAddr(s)) }
	for i, c := range []struct {
		base, cut, want []Interval
	}{
		{[]Interval{p("10.0.0.0/24")}, nil, []Interval{p("10.0.0.0/24")}},
		{[]Interval{p("10.0.0.0/24")}, []Interval{p("10.0.0.0/25")}, []Interval{p("10.0.0.128/25")}},
		{[]Interval{p("10.0.0.0/24")}, []Interval{h("10.0.0.5")}, []Interval{{p("10.0.0.0/24").First, h("10.0.0.4").First}, {h("10.0.0.6").First, p("10.0.0.0/24").Last}}},
		{[]Interval{p("10.0.0.0/24")}, []Interval{p("10.0.0.0/16")}, nil},
		{[]Interval{p("0.0.0.0/0")}, []Interval{p("0.0.0.0/1")}, []Interval{p("128.0.0.0/1")}},
		{[]Interval{h("10.0.0.1"), h("10.0.0.2"), h("10.0.0.4")}, nil, []Interval{{h("10.0.0.1").First, h("10.0.0.2").First}, h("10.0.0.4")}},
		{[]Interval{p("10.0.0.0/24")}, []Interval{h("10.0.0.0"), h("10.0.0.255")}, []Interval{{h("10.0.0.1").First, h("10.0.0.254").First}}},
	} {
		got := subtract(c.base, c.cut)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%d: %v - %v = %v, want %v", i, c.base, c.cut, got, c.want)
		}
	}
	ivs := normalize([]Interval{p("10.1.0.0/16"), h("10.0.0.9")})
	for s, want := range map[string]bool{"10.1.2.3": true, "10.0.0.9": true, "10.0.0.8": false, "10.2.0.0": false, "10.0.255.255": false} {
		if got := contains(ivs, addrU32(netip.MustParseAddr(s))); got != want {
			t.Errorf("contains %s = %v", s, got)
		}
	}
	rm, add := diffIntervals([]Interval{h("10.0.0.1"), h("10.0.0.3")}, []Interval{{h("10.0.0.1").First, h("10.0.0.2").First}, h("10.0.0.3")})
	if fmt.Sprint(rm) != fmt.Sprint([]Interval{h("10.0.0.1")}) || fmt.Sprint(add) != fmt.Sprint([]Interval{{h("10.0.0.1").First, h("10.0.0.2").First}}) {
		t.Errorf("diff: removed %v added %v", rm, add)
	}
}

func TestPolicyTypes(t *testing.T) {
	eg := []networkingv1.NetworkPolicyEgressRule{{}}
	for i, c := range []struct {
		spec         networkingv1.NetworkPolicySpec
		ingress, egr bool
	}{
		{networkingv1.NetworkPolicySpec{}, true, false},
		{networkingv1.NetworkPolicySpec{Egress: eg}, true, true},
		{networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}, false, true},
		{networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Egress: eg}, true, false},
	} {
		in, e := PolicyTypes(&networkingv1.NetworkPolicy{Spec: c.spec})
		if in != c.ingress || e != c.egr {
			t.Errorf("%d: ingress %v egress %v", i, in, e)
		}
	}
}

// TestRules: the shape of the allow-lists (what the nftables layer translates).
func TestRules(t *testing.T) {
	tcp := corev1.ProtocolTCP
	port := func(p intstr.IntOrString) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p}
	}
	pod := func(ns, name, ip string, local bool, ports ...corev1.ContainerPort) Pod {
		return Pod{Namespace: ns, Name: name, Labels: map[string]string{"app": name}, IP: netip.MustParseAddr(ip), Local: local, Ports: ports}
	}
	s := State{
		Namespaces: map[string]map[string]string{"a": {}, "b": {}},
		Pods: []Pod{
			pod("a", "web", "10.0.0.2", true, corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: tcp}),
			pod("a", "db", "10.0.0.3", true, corev1.ContainerPort{Name: "http", ContainerPort: 9090, Protocol: tcp}),
			pod("b", "remote", "10.0.1.2", false, corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: tcp}),
			{Namespace: "a", Name: "pending", Labels: map[string]string{"app": "web"}, Local: true},
		},
		Policies: []*networkingv1.NetworkPolicy{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromString("http"))}}},
				Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromString("http")), port(intstr.FromInt32(53))},
					To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}},
			}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}}},
		},
	}
	prog, errs := Compute(s)
	if len(errs) != 1 {
		t.Errorf("errors %v, want the bad selector's", errs)
	}
	if len(prog.Pods) != 1 {
		t.Fatalf("pods %v, want web only", prog.Pods)
	}
	web := prog.Pods[netip.MustParseAddr("10.0.0.2")]
	if web.Ingress == nil || len(web.Ingress.Rules) != 1 || web.Ingress.Rules[0].Set != "" || fmt.Sprint(web.Ingress.Rules[0].Ports) != "[{TCP 8080 8080}]" {
		t.Errorf("ingress %+v", web.Ingress)
	}
	if web.Egress == nil || len(web.Egress.Rules) != 3 {
		t.Fatalf("egress %+v", web.Egress)
	}
	// 53 to every pod; named port http: 8080 on web and remote, 9090 on db.
	want := map[string]string{
		"a/p/eg0":               "[10.0.0.2-10.0.0.3 10.0.1.2]",
		"a/p/eg0/http/TCP/8080": "[10.0.0.2 10.0.1.2]",
		"a/p/eg0/http/TCP/9090": "[10.0.0.3]",
	}
	for name, ivs := range want {
		if fmt.Sprint(prog.Sets[name]) != ivs {
			t.Errorf("set %s = %v, want %s", name, prog.Sets[name], ivs)
		}
	}
	ip := netip.MustParseAddr
	for _, c := range []struct {
		src, dst string
		port     uint16
		want     bool
	}{
		{"10.0.0.2", "10.0.1.2", 8080, true}, {"10.0.0.2", "10.0.1.2", 9090, false}, {"10.0.0.2", "10.0.0.3", 9090, true},
		{"10.0.0.2", "10.0.0.3", 8080, false}, {"10.0.0.2", "10.0.0.3", 53, true}, {"10.0.0.2", "8.8.8.8", 53, false},
		{"10.0.1.2", "10.0.0.2", 8080, true}, {"10.0.1.2", "10.0.0.2", 80, false}, {"10.0.0.2", "10.0.0.2", 1, true},
	} {
		if got := Evaluate(prog, ip(c.src), ip(c.dst), tcp, c.port); got != c.want {
			t.Errorf("%s -> %s:%d = %v", c.src, c.dst, c.port, got)
		}
	}
}

func TestRelevantChange(t *testing.T) {
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", Labels: map[string]string{"app": "x"}, ResourceVersion: "1"},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.2"}}
	mod := func(f func(p *corev1.Pod)) *corev1.Pod { p := base.DeepCopy(); f(p); return p }
	for name, c := range map[string]struct {
		new  *corev1.Pod
		want bool
	}{
		"resourceVersion only": {mod(func(p *corev1.Pod) { p.ResourceVersion = "2" }), false},
		"conditions only":      {mod(func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady}} }), false},
		"label":                {mod(func(p *corev1.Pod) { p.Labels = map[string]string{"app": "y"} }), true},
		"address":              {mod(func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.3" }), true},
		"finished":             {mod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), true},
		"port":                 {mod(func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}} }), true},
		"node":                 {mod(func(p *corev1.Pod) { p.Spec.NodeName = "n2" }), true},
	} {
		if got := relevantChange(base, c.new); got != c.want {
			t.Errorf("%s: %v", name, got)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}}}
	ns2 := ns.DeepCopy()
	ns2.ResourceVersion = "9"
	if relevantChange(ns, ns2) {
		t.Error("namespace resourceVersion")
	}
	ns2.Labels = map[string]string{"k": "w"}
	if !relevantChange(ns, ns2) {
		t.Error("namespace label")
	}
}
