package services

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

func service(name string, typ corev1.ServiceType, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

var ipRange = netip.MustParsePrefix(clusterIPRange)

// checkIPAddress asserts that ip is reserved by an IPAddress pointing at ns/name.
func checkIPAddress(t *testing.T, ip, ns, name string) {
	t.Helper()
	a, err := cs.NetworkingV1().IPAddresses().Get(context.Background(), ip, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("IPAddress %s of %s/%s: %v", ip, ns, name, err)
	}
	ref := a.Spec.ParentRef
	if ref == nil || ref.Group != "" || ref.Resource != "services" || ref.Namespace != ns || ref.Name != name {
		t.Fatalf("IPAddress %s parentRef %+v, want services %s/%s", ip, ref, ns, name)
	}
	if a.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" || a.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" {
		t.Fatalf("IPAddress %s labels %v", ip, a.Labels)
	}
}

func ipAddressGone(t *testing.T, ip string) {
	t.Helper()
	if _, err := cs.NetworkingV1().IPAddresses().Get(context.Background(), ip, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("IPAddress %s: %v, want NotFound", ip, err)
	}
}

// invalid asserts a 422 whose cause on field says msg.
func invalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422 Invalid on %s", err, field)
	}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return
		}
	}
	t.Fatalf("no cause %s %q in %v", field, msg, err)
}

// Many Services created at once get distinct cluster IPs from the range, each reserved by
// its own IPAddress, and NodePort Services distinct node ports from the node port range.
func TestConcurrentCreates(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "concurrent")
	const workers, each = 8, 8
	var mu sync.Mutex
	var created []*corev1.Service
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				typ := corev1.ServiceTypeClusterIP
				if i%2 == 1 {
					typ = corev1.ServiceTypeNodePort
				}
				s, err := cs.CoreV1().Services(ns).Create(ctx, service(fmt.Sprintf("s-%d-%d", w, i), typ), metav1.CreateOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				created = append(created, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ips, ports := map[string]string{}, map[int32]string{}
	for _, s := range created {
		ip := s.Spec.ClusterIP
		if other, dup := ips[ip]; dup {
			t.Errorf("%s and %s both got %s", other, s.Name, ip)
		}
		ips[ip] = s.Name
		if a, err := netip.ParseAddr(ip); err != nil || !ipRange.Contains(a) {
			t.Errorf("%s: cluster IP %q not in %s", s.Name, ip, clusterIPRange)
		}
		if len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != ip || len(s.Spec.IPFamilies) != 1 || s.Spec.IPFamilies[0] != corev1.IPv4Protocol ||
			s.Spec.IPFamilyPolicy == nil || *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			t.Errorf("%s: dual-stack fields %v %v %v", s.Name, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy)
		}
		checkIPAddress(t, ip, ns, s.Name)
		np := s.Spec.Ports[0].NodePort
		switch s.Spec.Type {
		case corev1.ServiceTypeNodePort:
			if np < 31000 || np > 31099 {
				t.Errorf("%s: node port %d not in %s", s.Name, np, nodePortRange)
			}
			if other, dup := ports[np]; dup {
				t.Errorf("%s and %s both got node port %d", other, s.Name, np)
			}
			ports[np] = s.Name
		default:
			if np != 0 {
				t.Errorf("ClusterIP Service %s got node port %d", s.Name, np)
			}
		}
	}
	if len(ports) != workers*each/2 {
		t.Errorf("%d node ports, want %d", len(ports), workers*each/2)
	}
	// Deleting releases: the IPAddresses go.
	for _, s := range created[:4] {
		if err := cs.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ipAddressGone(t, s.Spec.ClusterIP)
	}
}

// A chosen cluster IP is honoured; one in use, outside the range or of a family the cluster
// does not have is refused with upstream's 422.
func TestChosenClusterIP(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "chosen")
	svcs := cs.CoreV1().Services(ns)
	a, err := svcs.Create(ctx, service("a", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.100.0.50" }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.ClusterIP != "10.100.0.50" || len(a.Spec.ClusterIPs) != 1 || a.Spec.ClusterIPs[0] != "10.100.0.50" {
		t.Fatalf("chosen IP not honoured: %v %v", a.Spec.ClusterIP, a.Spec.ClusterIPs)
	}
	checkIPAddress(t, "10.100.0.50", ns, "a")

	_, err = svcs.Create(ctx, service("b", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.100.0.50" }), metav1.CreateOptions{})
	invalid(t, err, "spec.clusterIPs", "failed to allocate IP 10.100.0.50: provided IP is already allocated")
	checkIPAddress(t, "10.100.0.50", ns, "a")

	_, err = svcs.Create(ctx, service("c", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.200.0.5" }), metav1.CreateOptions{})
	invalid(t, err, "spec.clusterIPs", "failed to allocate IP 10.200.0.5")
	ipAddressGone(t, "10.200.0.5")

	_, err = svcs.Create(ctx, service("d", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }), metav1.CreateOptions{})
	invalid(t, err, "spec.ipFamilies[0]", "not configured on this cluster")

	_, err = svcs.Create(ctx, service("e", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::5" }), metav1.CreateOptions{})
	invalid(t, err, "spec.clusterIPs[0]", "IPv6 is not configured on this cluster")

	_, err = svcs.Create(ctx, service("f", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	}), metav1.CreateOptions{})
	invalid(t, err, "spec.ipFamilyPolicy", "this cluster is not configured for dual-stack services")

	// PreferDualStack on a single-stack cluster is single-stack.
	g, err := svcs.Create(ctx, service("g", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Spec.ClusterIPs) != 1 || len(g.Spec.IPFamilies) != 1 || *g.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		t.Fatalf("PreferDualStack: %v %v %v", g.Spec.ClusterIPs, g.Spec.IPFamilies, *g.Spec.IPFamilyPolicy)
	}

	// A dry run reserves nothing: the chosen IP stays free for a real create.
	if _, err := svcs.Create(ctx, service("h", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.100.0.77" }),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	ipAddressGone(t, "10.100.0.77")
	if _, err := svcs.Create(ctx, service("h", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.100.0.77" }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkIPAddress(t, "10.100.0.77", ns, "h")

	// The cluster IP is immutable; an update that leaves it out keeps it.
	cur, _ := svcs.Get(ctx, "a", metav1.GetOptions{})
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "10.100.0.51", []string{"10.100.0.51"}
	if _, err := svcs.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing the cluster IP: %v, want 422", err)
	}
	ipAddressGone(t, "10.100.0.51")
}

// An update that leaves out what was allocated (a PUT from a client that never read the
// cluster IP or node ports) keeps it, as upstream's patchAllocatedValues.
func TestUpdateKeepsAllocations(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "keep")
	svcs := cs.CoreV1().Services(ns)
	a, err := svcs.Create(ctx, service("a", corev1.ServiceTypeNodePort), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur := a.DeepCopy()
	cur.ResourceVersion = ""
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "", nil
	cur.Spec.Ports[0].NodePort = 0
	cur.Labels = map[string]string{"updated": "yes"}
	up, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Spec.ClusterIP != a.Spec.ClusterIP || up.Spec.Ports[0].NodePort != a.Spec.Ports[0].NodePort {
		t.Fatalf("update without allocations: %q port %d, want %q port %d kept", up.Spec.ClusterIP, up.Spec.Ports[0].NodePort, a.Spec.ClusterIP, a.Spec.Ports[0].NodePort)
	}
	checkIPAddress(t, a.Spec.ClusterIP, ns, "a")
}

// Headless and ExternalName Services get no cluster IP and no IPAddress.
func TestHeadlessAndExternalName(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "headless")
	svcs := cs.CoreV1().Services(ns)
	before, err := cs.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := svcs.Create(ctx, service("h", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Spec.ClusterIP != "None" || len(h.Spec.ClusterIPs) != 1 || h.Spec.ClusterIPs[0] != "None" {
		t.Fatalf("headless: %q %v", h.Spec.ClusterIP, h.Spec.ClusterIPs)
	}
	// Headless without a selector is RequireDualStack with both families, as upstream.
	hs, err := svcs.Create(ctx, service("hs", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone; s.Spec.Selector = nil }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *hs.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyRequireDualStack || len(hs.Spec.IPFamilies) != 2 {
		t.Fatalf("selectorless headless: %v %v", *hs.Spec.IPFamilyPolicy, hs.Spec.IPFamilies)
	}
	e, err := svcs.Create(ctx, service("e", corev1.ServiceTypeExternalName, func(s *corev1.Service) { s.Spec.ExternalName = "example.com"; s.Spec.Selector = nil }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Spec.ClusterIP != "" || len(e.Spec.ClusterIPs) != 0 || e.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("ExternalName got %q %v %d", e.Spec.ClusterIP, e.Spec.ClusterIPs, e.Spec.Ports[0].NodePort)
	}
	after, err := cs.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range after.Items {
		if r := a.Spec.ParentRef; r != nil && r.Namespace == ns {
			t.Errorf("IPAddress %s for %s/%s", a.Name, r.Namespace, r.Name)
		}
	}
	_ = before
}

// Node ports: NodePort and LoadBalancer Services get them from the range, a chosen one in
// use or outside the range is refused, a type change to ClusterIP releases them and one to
// NodePort allocates them, and a Local LoadBalancer gets a health check node port.
func TestNodePorts(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "nodeports")
	svcs := cs.CoreV1().Services(ns)
	a, err := svcs.Create(ctx, service("a", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 31005 }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.Ports[0].NodePort != 31005 {
		t.Fatalf("chosen node port: %d", a.Spec.Ports[0].NodePort)
	}
	_, err = svcs.Create(ctx, service("b", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 31005 }), metav1.CreateOptions{})
	invalid(t, err, "spec.ports[0].nodePort", "provided port is already allocated")
	_, err = svcs.Create(ctx, service("c", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30000 }), metav1.CreateOptions{})
	invalid(t, err, "spec.ports[0].nodePort", "provided port is not in the valid range. The range of valid ports is 31000-31099")

	// NodePort → ClusterIP releases the port (another Service can take it at once) ...
	cur, _ := svcs.Get(ctx, "a", metav1.GetOptions{})
	cur.Spec.Type = corev1.ServiceTypeClusterIP
	cur.Spec.Ports[0].NodePort = 0
	cur.Spec.ExternalTrafficPolicy = ""
	up, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("ClusterIP Service kept node port %d", up.Spec.Ports[0].NodePort)
	}
	if _, err := svcs.Create(ctx, service("d", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 31005 }), metav1.CreateOptions{}); err != nil {
		t.Fatalf("released port not reusable: %v", err)
	}
	// ... and ClusterIP → NodePort allocates one, keeping the cluster IP.
	cur, _ = svcs.Get(ctx, "a", metav1.GetOptions{})
	cur.Spec.Type = corev1.ServiceTypeNodePort
	up, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if np := up.Spec.Ports[0].NodePort; np < 31000 || np > 31099 || np == 31005 {
		t.Fatalf("ClusterIP → NodePort got node port %d", np)
	}
	if up.Spec.ClusterIP != a.Spec.ClusterIP {
		t.Fatalf("type change moved the cluster IP %s → %s", a.Spec.ClusterIP, up.Spec.ClusterIP)
	}

	lb, err := svcs.Create(ctx, service("lb", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc, np := lb.Spec.HealthCheckNodePort, lb.Spec.Ports[0].NodePort
	if hc < 31000 || hc > 31099 || np < 31000 || np > 31099 || hc == np {
		t.Fatalf("LoadBalancer Local: node port %d, health check node port %d", np, hc)
	}
	noPorts, err := svcs.Create(ctx, service("lb-noports", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if noPorts.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("allocateLoadBalancerNodePorts=false got node port %d", noPorts.Spec.Ports[0].NodePort)
	}
	// Deleting the Local LoadBalancer frees both of its ports.
	if err := svcs.Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(ctx, service("reuse", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, NodePort: hc})
		s.Spec.Ports[0].NodePort = np
	}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("ports of a deleted Service not reusable: %v", err)
	}
}

// ExternalName → ClusterIP allocates a cluster IP; ClusterIP → ExternalName releases it.
func TestExternalNameTypeChanges(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "externalname")
	svcs := cs.CoreV1().Services(ns)
	c, err := svcs.Create(ctx, service("c", corev1.ServiceTypeClusterIP), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkIPAddress(t, c.Spec.ClusterIP, ns, "c")
	cur := c.DeepCopy()
	cur.Spec.Type, cur.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs, cur.Spec.IPFamilies, cur.Spec.IPFamilyPolicy = "", nil, nil, nil
	cur.Spec.Selector = nil
	if _, err := svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ipAddressGone(t, c.Spec.ClusterIP)

	e, err := svcs.Create(ctx, service("e", corev1.ServiceTypeExternalName, func(s *corev1.Service) { s.Spec.ExternalName = "example.com"; s.Spec.Selector = nil }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur = e.DeepCopy()
	cur.Spec.Type, cur.Spec.ExternalName = corev1.ServiceTypeClusterIP, ""
	up, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Spec.ClusterIP == "" {
		t.Fatal("ExternalName → ClusterIP got no cluster IP")
	}
	checkIPAddress(t, up.Spec.ClusterIP, ns, "e")
}
