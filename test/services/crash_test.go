package services

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// allocationState checks what allocation promises across everything stored: duplicates
// (never acceptable) are returned in bad; what the repair loop still has to do (a Service
// without its IPAddress, an IPAddress whose Service is gone) in pending.
func allocationState(ctx context.Context, cs kubernetes.Interface) (bad, pending []string, err error) {
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	addrs, err := cs.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	byIP, byPort := map[string]string{}, map[int32]string{}
	owners := map[string]*corev1.Service{}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		key := s.Namespace + "/" + s.Name
		owners[key] = s
		for _, ip := range s.Spec.ClusterIPs {
			if ip == corev1.ClusterIPNone {
				continue
			}
			if other, dup := byIP[ip]; dup {
				bad = append(bad, fmt.Sprintf("%s and %s share cluster IP %s", other, key, ip))
			}
			byIP[ip] = key
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			if other, dup := byPort[p.NodePort]; dup {
				bad = append(bad, fmt.Sprintf("%s and %s share node port %d", other, key, p.NodePort))
			}
			byPort[p.NodePort] = key
		}
	}
	reserved := map[string]string{}
	for _, a := range addrs.Items {
		ref := a.Spec.ParentRef
		if a.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" || ref == nil {
			continue
		}
		key := ref.Namespace + "/" + ref.Name
		reserved[a.Name] = key
		if s, ok := owners[key]; !ok || !slices.Contains(s.Spec.ClusterIPs, a.Name) {
			pending = append(pending, fmt.Sprintf("IPAddress %s reserved for %s, which does not hold it", a.Name, key))
		}
	}
	for ip, key := range byIP {
		if reserved[ip] != key {
			pending = append(pending, fmt.Sprintf("%s holds %s without its IPAddress (%q)", key, ip, reserved[ip]))
		}
	}
	return bad, pending, nil
}

// A server killed with SIGKILL while clients create Services leaves no duplicate cluster IP
// or node port, and once restarted, its repair loop removes every address a Service never
// got and reserves every address a Service holds.
func TestKillDuringCreates(t *testing.T) {
	t.Parallel()
	dir, port := t.TempDir(), freePort(t)
	// The ranges as a user sets them, by flag.
	flags := []string{"--service-cluster-ip-range", "10.120.0.0/16", "--service-node-port-range", "32000-32099"}
	p := startServer(t, "server", dir, port, flags...)
	ctx := context.Background()
	cs := p.cs
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crash"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var created atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				typ := corev1.ServiceTypeClusterIP
				if i%2 == 0 {
					typ = corev1.ServiceTypeNodePort
				}
				if _, err := cs.CoreV1().Services("crash").Create(ctx, service(fmt.Sprintf("w%d-%d", w, i), typ), metav1.CreateOptions{}); err == nil {
					created.Add(1)
				} else {
					time.Sleep(10 * time.Millisecond) // the server is gone: do not spin
				}
			}
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for created.Load() < 40 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if created.Load() < 40 {
		t.Fatalf("only %d Services created before the kill:\n%s", created.Load(), p.log())
	}
	p.kill()
	close(stop)
	wg.Wait()
	t.Logf("%d Services acknowledged before SIGKILL", created.Load())

	p = startServer(t, "server restarted", dir, port, flags...)
	bad, pending, err := allocationState(ctx, p.cs)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("after the crash: %v", bad)
	}
	t.Logf("after the restart, %d allocations for repair to settle", len(pending))
	// New creates after the restart never collide with what survived.
	for i := range 10 {
		if _, err := p.cs.CoreV1().Services("crash").Create(ctx, service(fmt.Sprintf("after-%d", i), corev1.ServiceTypeNodePort), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(repairDeadline)
	for {
		bad, pending, err = allocationState(ctx, p.cs)
		if err == nil && len(bad) > 0 {
			t.Fatalf("duplicates: %v", bad)
		}
		if err == nil && len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not repaired within %s: %v %v", repairDeadline, pending, err)
		}
		time.Sleep(time.Second)
	}
	svcs, err := p.cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flagRange := netip.MustParsePrefix("10.120.0.0/16")
	for _, s := range svcs.Items {
		if a, err := netip.ParseAddr(s.Spec.ClusterIP); err != nil || !flagRange.Contains(a) {
			t.Errorf("%s/%s: cluster IP %q not in --service-cluster-ip-range", s.Namespace, s.Name, s.Spec.ClusterIP)
		}
		if s.Name == "kubernetes" && s.Spec.ClusterIP != "10.120.0.1" {
			t.Errorf("kubernetes Service on %s, want 10.120.0.1", s.Spec.ClusterIP)
		}
		for _, sp := range s.Spec.Ports {
			if sp.NodePort != 0 && (sp.NodePort < 32000 || sp.NodePort > 32099) {
				t.Errorf("%s/%s: node port %d not in --service-node-port-range", s.Namespace, s.Name, sp.NodePort)
			}
		}
	}
}
