package services

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/controllers/kubernetesservice"
	"kubeos.dev/kube/internal/server/servertest"
)

// publicIP is the address servers bound to 127.0.0.1 are listed under (upstream's rule:
// the host's interface address, since Endpoints refuse loopback).
func publicIP(t *testing.T) string {
	t.Helper()
	ip, err := kubernetesservice.PublicAddress("", "127.0.0.1")
	if err != nil {
		t.Fatalf("no host interface address: %v", err)
	}
	if ip.IsLoopback() {
		t.Fatalf("listed under loopback %s", ip)
	}
	return ip.String()
}

// listed returns the address:port pairs the kubernetes Service's EndpointSlices hold, and
// those its Endpoints hold.
func listed(ctx context.Context, cs kubernetes.Interface) (fromSlices, fromEndpoints []string, err error) {
	sl, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range sl.Items {
		for _, p := range s.Ports {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					fromSlices = append(fromSlices, net.JoinHostPort(a, fmt.Sprint(*p.Port)))
				}
			}
		}
	}
	ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, ss := range ep.Subsets {
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				fromEndpoints = append(fromEndpoints, net.JoinHostPort(a.IP, fmt.Sprint(p.Port)))
			}
		}
	}
	slices.Sort(fromSlices)
	slices.Sort(fromEndpoints)
	return fromSlices, fromEndpoints, nil
}

// waitListed waits until the kubernetes Service's EndpointSlices and Endpoints list exactly
// want (address:port pairs).
func waitListed(t *testing.T, cs kubernetes.Interface, d time.Duration, want ...string) {
	t.Helper()
	slices.Sort(want)
	servertest.Eventually(t, d, 200*time.Millisecond, func() error {
		s, e, err := listed(context.Background(), cs)
		if err != nil {
			return err
		}
		if !slices.Equal(s, want) || !slices.Equal(e, want) {
			return fmt.Errorf("EndpointSlices list %v, Endpoints %v; want %v", s, e, want)
		}
		return nil
	})
}

// The server creates default/kubernetes on the first address of the range, reserves that
// address, creates the ServiceCIDR for the range, and lists itself in the Service's
// Endpoints and EndpointSlice.
func TestKubernetesService(t *testing.T) {
	ctx := context.Background()
	var svc *corev1.Service
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		svc, err = cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err
	})
	want := corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(srv.Port))}
	if svc.Spec.ClusterIP != "10.100.0.1" || svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0] != want ||
		svc.Labels["provider"] != "kubernetes" || svc.Labels["component"] != "apiserver" || len(svc.Spec.Selector) != 0 {
		t.Fatalf("kubernetes Service: %+v %+v", svc.ObjectMeta.Labels, svc.Spec)
	}
	checkIPAddress(t, "10.100.0.1", "default", "kubernetes")

	cidr, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cidr.Spec.CIDRs, []string{clusterIPRange}) || !apimeta.IsStatusConditionTrue(cidr.Status.Conditions, "Ready") {
		t.Fatalf("ServiceCIDR kubernetes: %v %+v", cidr.Spec.CIDRs, cidr.Status.Conditions)
	}

	self := net.JoinHostPort(publicIP(t), fmt.Sprint(srv.Port))
	waitListed(t, cs, 30*time.Second, self)
	ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Labels[discoveryv1.LabelSkipMirror] != "true" || ep.Subsets[0].Ports[0].Name != "https" {
		t.Fatalf("Endpoints: %+v", ep)
	}
	slice, err := cs.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slice.AddressType != discoveryv1.AddressTypeIPv4 || slice.Labels[discoveryv1.LabelServiceName] != "kubernetes" ||
		*slice.Ports[0].Name != "https" || *slice.Ports[0].Protocol != corev1.ProtocolTCP || !*slice.Endpoints[0].Conditions.Ready {
		t.Fatalf("EndpointSlice: %+v", slice)
	}

	// The server's Lease, as upstream's identity Leases.
	leases, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: kubernetesservice.IdentityLabel + "=kube-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 1 || leases.Items[0].Annotations[kubernetesservice.AddressAnnotation] != self || !strings.HasPrefix(leases.Items[0].Name, "apiserver-") {
		t.Fatalf("server Leases: %+v", leases.Items)
	}

	// kubectl, as a user checks it.
	kubectl, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := servertest.RunKubectl(kubectl, t.TempDir(), srv.Kubeconfig, "", "get", "endpointslice", "kubernetes", "-n", "default")
	if err != nil {
		t.Fatalf("kubectl: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "IPv4") || !strings.Contains(out, fmt.Sprint(srv.Port)) || !strings.Contains(out, publicIP(t)) {
		t.Fatalf("kubectl get endpointslice kubernetes:\n%s", out)
	}
	out, stderr, err = servertest.RunKubectl(kubectl, t.TempDir(), srv.Kubeconfig, "", "get", "service", "kubernetes", "-n", "default")
	if err != nil || !strings.Contains(out, "10.100.0.1") || !strings.Contains(out, "443/TCP") {
		t.Fatalf("kubectl get service kubernetes: %v\n%s%s", err, out, stderr)
	}
}

// Two servers on one etcd both list themselves; one killed with SIGKILL drops out when its
// Lease expires, one stopped drops out as it stops, one restarted comes back.
func TestKubernetesServiceTwoServers(t *testing.T) {
	t.Parallel()
	etcdURL := startEtcd(t)
	dir := t.TempDir()
	pa, pb := freePort(t), freePort(t)
	a := startServer(t, "server a", filepath.Join(dir, "a"), pa, "--etcd-servers", etcdURL)
	b := startServer(t, "server b", filepath.Join(dir, "b"), pb, "--etcd-servers", etcdURL, "--pki-dir", filepath.Join(dir, "a", "pki"))
	ip := publicIP(t)
	ea, eb := net.JoinHostPort(ip, fmt.Sprint(pa)), net.JoinHostPort(ip, fmt.Sprint(pb))
	// A new server lists itself within one pass (10 s) of being ready.
	waitListed(t, a.cs, 30*time.Second, ea, eb)
	waitListed(t, b.cs, 30*time.Second, ea, eb)

	// Killed: it drops out once its Lease (15 s) has expired and a, within 10 s, notices.
	b.kill()
	waitListed(t, a.cs, 60*time.Second, ea)
	leases, err := a.cs.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: kubernetesservice.IdentityLabel + "=kube-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 1 {
		t.Errorf("the dead server's Lease was not collected: %d Leases", len(leases.Items))
	}

	// Restarted: back again; stopped (SIGTERM): removes itself on the way out.
	b = startServer(t, "server b again", filepath.Join(dir, "b"), pb, "--etcd-servers", etcdURL, "--pki-dir", filepath.Join(dir, "a", "pki"))
	waitListed(t, a.cs, 30*time.Second, ea, eb)
	b.stop()
	s, e, err := listed(context.Background(), a.cs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s, []string{ea}) || !slices.Equal(e, []string{ea}) {
		t.Fatalf("after a graceful stop: EndpointSlices %v, Endpoints %v; want only %s\n%s", s, e, ea, b.log())
	}
}
