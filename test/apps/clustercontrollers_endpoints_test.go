package apps

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

func webPod(name string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}}}},
	}
}

func webService(name string, mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// endpointRow is one endpoint as a client reads it from the Service's EndpointSlices.
type endpointRow struct {
	Pod                         string
	IP                          string
	Port                        int32
	Ready, Serving, Terminating bool
}

func (r endpointRow) String() string {
	return fmt.Sprintf("%s %s:%d ready=%v serving=%v terminating=%v", r.Pod, r.IP, r.Port, r.Ready, r.Serving, r.Terminating)
}

// sliceRows lists the endpoints of svc's EndpointSlices managed by the EndpointSlice
// controller, sorted.
func sliceRows(ctx context.Context, cs kubernetes.Interface, ns, svc string) ([]string, []discoveryv1.EndpointSlice, error) {
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, nil, err
	}
	var rows []string
	for _, s := range l.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
			return nil, nil, fmt.Errorf("slice %s managed by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
		for _, e := range s.Endpoints {
			r := endpointRow{IP: e.Addresses[0], Ready: *e.Conditions.Ready, Serving: *e.Conditions.Serving, Terminating: *e.Conditions.Terminating}
			if e.TargetRef != nil {
				r.Pod = e.TargetRef.Name
			}
			for _, p := range s.Ports {
				r.Port = *p.Port
			}
			rows = append(rows, r.String())
		}
	}
	sort.Strings(rows)
	return rows, l.Items, nil
}

func expectRows(t *testing.T, cs kubernetes.Interface, ns, svc string, want ...string) []discoveryv1.EndpointSlice {
	t.Helper()
	sort.Strings(want)
	var slices []discoveryv1.EndpointSlice
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		rows, s, err := sliceRows(context.Background(), cs, ns, svc)
		if err != nil {
			return err
		}
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			return fmt.Errorf("endpoints of %s:\n%s\nwant\n%s", svc, strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
		slices = s
		return nil
	})
	return slices
}

// TestEndpointSlicesAndEndpoints: a Service with a selector gets EndpointSlices and
// Endpoints of its pods — ready, not ready, terminating — with the named target port
// resolved per pod, publishNotReadyAddresses honoured and headless Services labelled.
func TestEndpointSlicesAndEndpoints(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "eps")
	liveNode(t, cs, "eps-node", nil)
	for _, s := range []*corev1.Service{
		webService("web", nil),
		webService("web-unready", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		webService("web-headless", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
	} {
		if _, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runningPod(t, cs, ns, webPod("a", 8080), "eps-node", "10.250.1.1", true)
	runningPod(t, cs, ns, webPod("b", 8080), "eps-node", "10.250.1.2", false)
	c := runningPod(t, cs, ns, webPod("c", 9090), "eps-node", "10.250.1.3", true)
	// a pod of another app is no endpoint
	other := webPod("other", 8080)
	other.Labels["app"] = "db"
	runningPod(t, cs, ns, other, "eps-node", "10.250.1.4", true)

	want := []string{
		"a 10.250.1.1:8080 ready=true serving=true terminating=false",
		"b 10.250.1.2:8080 ready=false serving=false terminating=false",
		"c 10.250.1.3:9090 ready=true serving=true terminating=false",
	}
	got := expectRows(t, cs, ns, "web", want...)
	// pods whose named port resolves differently are in different slices (one port list each)
	if len(got) != 2 {
		t.Errorf("web has %d slices, want 2 (ports 8080 and 9090)", len(got))
	}
	for _, s := range got {
		if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Ports) != 1 || *s.Ports[0].Name != "web" || *s.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("slice %s: addressType %s ports %+v", s.Name, s.AddressType, s.Ports)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || s.OwnerReferences[0].Name != "web" {
			t.Errorf("slice %s ownerReferences %+v", s.Name, s.OwnerReferences)
		}
		if s.Endpoints[0].NodeName == nil || *s.Endpoints[0].NodeName != "eps-node" {
			t.Errorf("slice %s: endpoint nodeName %v", s.Name, s.Endpoints[0].NodeName)
		}
	}
	expectRows(t, cs, ns, "web-unready",
		"a 10.250.1.1:8080 ready=true serving=true terminating=false",
		"b 10.250.1.2:8080 ready=true serving=false terminating=false",
		"c 10.250.1.3:9090 ready=true serving=true terminating=false")
	for _, s := range expectRows(t, cs, ns, "web-headless", want...) {
		if _, ok := s.Labels[corev1.IsHeadlessService]; !ok {
			t.Errorf("headless slice %s labels %v", s.Name, s.Labels)
		}
	}

	// Endpoints: ready addresses and notReadyAddresses per port subset.
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var rows []string
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				rows = append(rows, fmt.Sprintf("%s:%d ready", a.IP, ss.Ports[0].Port))
			}
			for _, a := range ss.NotReadyAddresses {
				rows = append(rows, fmt.Sprintf("%s:%d notready", a.IP, ss.Ports[0].Port))
			}
		}
		sort.Strings(rows)
		if w := "10.250.1.1:8080 ready,10.250.1.2:8080 notready,10.250.1.3:9090 ready"; strings.Join(rows, ",") != w {
			return fmt.Errorf("Endpoints web: %v, want %s", rows, w)
		}
		return nil
	})

	// A pod being deleted stays, terminating and (still Ready) serving but not ready.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).Delete(context.Background(), c.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	expectRows(t, cs, ns, "web",
		"a 10.250.1.1:8080 ready=true serving=true terminating=false",
		"b 10.250.1.2:8080 ready=false serving=false terminating=false",
		"c 10.250.1.3:9090 ready=false serving=true terminating=true")

	// The pod turning ready shows.
	b, err := cs.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setPodStatus(ctx, cs, b, "10.250.1.2", true); err != nil {
		t.Fatal(err)
	}
	expectRows(t, cs, ns, "web",
		"a 10.250.1.1:8080 ready=true serving=true terminating=false",
		"b 10.250.1.2:8080 ready=true serving=true terminating=false",
		"c 10.250.1.3:9090 ready=false serving=true terminating=true")

	// A pod relabelled out of the selector leaves the Service's slices, and comes back when
	// relabelled into it (a pod change that touches only labels: its old and new Services).
	relabel := func(app string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("db")
	expectRows(t, cs, ns, "web",
		"b 10.250.1.2:8080 ready=true serving=true terminating=false",
		"c 10.250.1.3:9090 ready=false serving=true terminating=true")
	endpointsHas := func(ip string) bool {
		ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, ss := range ep.Subsets {
			for _, a := range append(ss.Addresses, ss.NotReadyAddresses...) {
				if a.IP == ip {
					return true
				}
			}
		}
		return false
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !endpointsHas("10.250.1.1"), nil
	}); err != nil {
		t.Errorf("the relabelled pod stayed in Endpoints web: %v", err)
	}
	relabel("web")
	expectRows(t, cs, ns, "web",
		"a 10.250.1.1:8080 ready=true serving=true terminating=false",
		"b 10.250.1.2:8080 ready=true serving=true terminating=false",
		"c 10.250.1.3:9090 ready=false serving=true terminating=true")

	// kubectl of both versions lists them.
	for _, v := range []string{"1.27", "1.33"} {
		bin, err := servertest.FindKubectl(v)
		if err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		out, stderr, err := servertest.RunKubectl(bin, home, clusterSrv.Kubeconfig, "", "-n", ns, "get", "endpointslices", "-l", "kubernetes.io/service-name=web")
		if err != nil {
			t.Fatalf("kubectl %s get endpointslices: %v\n%s", v, err, stderr)
		}
		if !strings.Contains(out, "ADDRESSTYPE") || !strings.Contains(out, "IPv4") || !strings.Contains(out, "8080") || !strings.Contains(out, "10.250.1.1") || !strings.Contains(out, "9090") {
			t.Errorf("kubectl %s get endpointslices:\n%s", v, out)
		}
		out, stderr, err = servertest.RunKubectl(bin, home, clusterSrv.Kubeconfig, "", "-n", ns, "get", "endpoints", "web")
		if err != nil {
			t.Fatalf("kubectl %s get endpoints: %v\n%s", v, err, stderr)
		}
		if !strings.Contains(out, "10.250.1.1:8080") || !strings.Contains(out, "10.250.1.2:8080") {
			t.Errorf("kubectl %s get endpoints web:\n%s", v, out)
		}
	}
}

// TestEndpointSliceSplit: more than 100 endpoints are split over slices of at most 100.
func TestEndpointSliceSplit(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "eps-split")
	liveNode(t, cs, "eps-split-node", nil)
	if _, err := cs.CoreV1().Services(ns).Create(ctx, webService("web", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 150
	for i := range n {
		runningPod(t, cs, ns, webPod(fmt.Sprintf("p%03d", i), 8080), "eps-split-node", fmt.Sprintf("10.250.2.%d", i+1), true)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		rows, sl, err := sliceRows(ctx, cs, ns, "web")
		if err != nil {
			return err
		}
		var sizes []int
		for _, s := range sl {
			sizes = append(sizes, len(s.Endpoints))
		}
		if len(rows) != n || len(sl) != 2 || slices.Max(sizes) > 100 {
			return fmt.Errorf("%d endpoints in slices of sizes %v, want %d in 2 of at most 100", len(rows), sizes, n)
		}
		return nil
	})
}

// TestEndpointsOfServicesWithoutSelector: Endpoints written by hand for a Service without
// selector are left alone by the Endpoints controller and mirrored into an EndpointSlice.
func TestEndpointsOfServicesWithoutSelector(t *testing.T) {
	clusterSuite.Need(t)
	cs, ctx := client(t), clusterCtxT(t)
	ns := clusterNamespace(t, cs, "eps-mirror")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "db", Port: 5432}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "192.0.2.50"}}, Ports: []corev1.EndpointPort{{Name: "db", Port: 5432}}}}}
	if _, err := cs.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=ext"})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 || l.Items[0].Labels[discoveryv1.LabelManagedBy] != "endpointslicemirroring-controller.k8s.io" ||
			len(l.Items[0].Endpoints) != 1 || l.Items[0].Endpoints[0].Addresses[0] != "192.0.2.50" || *l.Items[0].Ports[0].Port != 5432 {
			return fmt.Errorf("mirrored slices: %+v", l.Items)
		}
		return nil
	})
	got, err := cs.CoreV1().Endpoints(ns).Get(ctx, "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Subsets) != 1 || got.Subsets[0].Addresses[0].IP != "192.0.2.50" {
		t.Errorf("Endpoints of a Service without selector changed: %+v", got.Subsets)
	}
	// the kubernetes Service's Endpoints are not mirrored (skip-mirror) and keep their slice
	l, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != "kubernetes" {
		t.Errorf("kubernetes Service slices: %d", len(l.Items))
	}
}
