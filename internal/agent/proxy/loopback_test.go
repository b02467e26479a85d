package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// inOtherNetns runs f on a thread of its own in the namespace ns (the thread is discarded
// afterwards).
func inOtherNetns(t testing.TB, ns netns.NsHandle, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %v: %v: %s", args, err, out)
	}
	return nil
}

func readRouteLocalnet(bridge string) string {
	b, _ := os.ReadFile(routeLocalnet(bridge))
	return strings.TrimSpace(string(b))
}

// TestKernelLoopbackAPIServer: in a namespace of the test's ("the node", its API server on
// 127.0.0.1:6443 only, the kubernetes Service listing 10.1.0.1:6443 where nothing listens)
// with a pod bridge made after the proxy started and a "pod" in a second namespace behind
// it: the pod and the node reach the API server through the ClusterIP; the bridge gets
// route_localnet when it appears; the pod cannot reach the node's loopback otherwise
// (which route_localnet alone would allow); a restart without the option returns to the
// listed endpoint and turns route_localnet off, and Cleanup turns it off too.
func TestKernelLoopbackAPIServer(t *testing.T) {
	inNetns(t)
	node, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	serve(t, "127.0.0.1:6443", "api")
	serve(t, "127.0.0.1:2379", "etcd")
	const bridge, table = "kt-br0", "kt-loop"
	o := Options{Client: fake.NewClientset(), NodeName: "node-a", NodeIP: "10.1.0.1", Table: table,
		ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16", APIServer: "127.0.0.1:6443", Bridge: bridge}
	px, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	kubernetes := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
		Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}}}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", ResourceVersion: "1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	px.OnServiceAdd(kubernetes)
	px.OnEndpointSliceAdd(slice)
	if err := px.sync(); err != nil {
		t.Fatal(err)
	}
	// The node's own processes.
	if got, err := fetch("10.96.0.1:443"); err != nil || got != "api" {
		t.Fatalf("from the node: %q, %v; want the loopback API server", got, err)
	}

	// The bridge appears after the start (the CNI plugin makes it with the first pod):
	// the watch turns route_localnet on. It runs on a thread in the node's namespace, as
	// Run's goroutine does in the agent's.
	ctx, cancel := context.WithCancel(t.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		runtime.LockOSThread()
		if err := netns.Set(node); err != nil {
			t.Error(err)
			return
		}
		watchBridge(ctx, bridge, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-watched }()
	pod, err := netns.New() // this thread is in the pod's namespace now
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	if err := netns.Set(node); err != nil {
		t.Fatal(err)
	}
	podBehindBridge(t, bridge, "kt", pod)
	deadline := time.Now().Add(time.Minute)
	for readRouteLocalnet(bridge) != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("route_localnet of %s is %q a minute after it appeared", bridge, readRouteLocalnet(bridge))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The pod: lo down (no local 127.0.0.0/8, so the pod's packets for it go to the
	// node, as a pod with raw sockets could send them).
	if err := inOtherNetns(t, pod, func() error {
		for _, args := range [][]string{{"addr", "add", "10.244.0.2/24", "dev", "kt-veth1"}, {"link", "set", "kt-veth1", "up"},
			{"route", "add", "default", "via", "10.244.0.1"}, {"route", "add", "127.0.0.0/8", "via", "10.244.0.1"}} {
			if err := ipCmd(args...); err != nil {
				return err
			}
		}
		return os.WriteFile("/proc/sys/net/ipv4/conf/kt-veth1/route_localnet", []byte("1\n"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	fromPod := func(addr string) (string, error) {
		var got string
		err := inOtherNetns(t, pod, func() error {
			var err error
			got, err = fetch(addr)
			return err
		})
		return got, err
	}
	if got, err := fromPod("10.96.0.1:443"); err != nil || got != "api" {
		t.Errorf("from the pod: %q, %v; want the loopback API server", got, err)
	}
	if got, err := fromPod("127.0.0.1:2379"); err == nil {
		t.Errorf("the pod reached the node's loopback without the proxy's DNAT: %q", got)
	}
	// Without the guard, route_localnet would let it through: the guard is what stops it.
	conn, _ := nftables.New(nftables.AsLasting())
	tb := &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}
	conn.FlushChain(&nftables.Chain{Name: guardChain, Table: tb})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := fromPod("127.0.0.1:2379"); err != nil || got != "etcd" {
		t.Errorf("without the guard: %q, %v; want the node's loopback reached (else the guard is not what is tested)", got, err)
	}
	if err := px.prog.setup(); err != nil { // the guard again, as a restart makes it
		t.Fatal(err)
	}

	// A restart without the loopback API server: the guard goes, route_localnet is off,
	// the listed endpoint is used (nothing listens there).
	o.APIServer = ""
	px2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if v := readRouteLocalnet(bridge); v != "0" {
		t.Errorf("route_localnet %q after a restart without the loopback API server", v)
	}
	if ok, err := hasChain(conn, tb, guardChain); err != nil || ok {
		t.Errorf("guard chain still there after a restart without it (%v)", err)
	}
	px2.OnServiceAdd(kubernetes)
	px2.OnEndpointSliceAdd(slice)
	if err := px2.sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := fetch("10.96.0.1:443"); err == nil {
		t.Errorf("from the node without the option: %q, want the listed endpoint's refusal", got)
	}

	// Again with it, then Cleanup: route_localnet off, table gone.
	o.APIServer = "127.0.0.1:6443"
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
	if v := readRouteLocalnet(bridge); v != "1" {
		t.Errorf("route_localnet %q after a restart with the loopback API server", v)
	}
	if err := Cleanup(t.Context(), table, "10.96.0.0/12"); err != nil {
		t.Fatal(err)
	}
	if v := readRouteLocalnet(bridge); v != "0" {
		t.Errorf("route_localnet %q after Cleanup", v)
	}
}

// BenchmarkPodToAPIServer is a pod's connection to the kubernetes Service's ClusterIP, up
// to the API server's answer, in private namespaces as TestKernelLoopbackAPIServer's:
// DNATed to an API server on loopback (Options.APIServer: route_localnet on the bridge,
// the guard in the input hook) or, as upstream, to the endpoint the Service lists, the
// node's address (an API server bound to the network). Both are one DNAT in the kernel.
func BenchmarkPodToAPIServer(b *testing.B) {
	inNetns(b)
	serve(b, "127.0.0.1:6443", "api")
	serve(b, "10.1.0.1:6443", "api")
	const bridge, table = "kb-br0", "kb-loop"
	defer Cleanup(context.Background(), table, "10.96.0.0/12")
	node, err := netns.Get()
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	pod, err := netns.New()
	if err != nil {
		b.Fatal(err)
	}
	defer pod.Close()
	if err := netns.Set(node); err != nil {
		b.Fatal(err)
	}
	podBehindBridge(b, bridge, "kb", pod)
	if err := inOtherNetns(b, pod, func() error {
		for _, args := range [][]string{{"addr", "add", "10.244.0.2/24", "dev", "kb-veth1"}, {"link", "set", "kb-veth1", "up"},
			{"link", "set", "lo", "up"}, {"route", "add", "default", "via", "10.244.0.1"}} {
			if err := ipCmd(args...); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	kubernetes := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
		Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}}}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", ResourceVersion: "1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	for _, bc := range []struct{ name, apiServer string }{{"listed-endpoint", ""}, {"loopback-redirect", "127.0.0.1:6443"}} {
		b.Run(bc.name, func(b *testing.B) {
			// In the node's namespace: b.Run's goroutine is on another thread.
			if err := inOtherNetns(b, node, func() error {
				px, err := New(Options{Client: fake.NewClientset(), NodeName: "node-a", NodeIP: "10.1.0.1", Table: table,
					ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16", APIServer: bc.apiServer, Bridge: bridge})
				if err != nil {
					return err
				}
				px.OnServiceAdd(kubernetes)
				px.OnEndpointSliceAdd(slice)
				return px.sync()
			}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := inOtherNetns(b, pod, func() error {
				for range b.N {
					if got, err := fetch("10.96.0.1:443"); err != nil || got != "api" {
						return fmt.Errorf("from the pod: %q, %v", got, err)
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// podBehindBridge makes, in the current (node) namespace, the pod bridge with the gateway
// address 10.244.0.1/24 and a veth pair <prefix>-veth0/1 whose node end is on the bridge and
// whose other end is moved into pod.
func podBehindBridge(tb testing.TB, bridge, prefix string, pod netns.NsHandle) {
	tb.Helper()
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"}, {"addr", "add", "10.244.0.1/24", "dev", bridge}, {"link", "set", bridge, "up"},
		{"link", "add", prefix + "-veth0", "type", "veth", "peer", "name", prefix + "-veth1"}, {"link", "set", prefix + "-veth0", "master", bridge},
		{"link", "set", prefix + "-veth0", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			tb.Fatal(err)
		}
	}
	peer, err := netlink.LinkByName(prefix + "-veth1")
	if err != nil {
		tb.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(peer, int(pod)); err != nil {
		tb.Fatal(err)
	}
}
