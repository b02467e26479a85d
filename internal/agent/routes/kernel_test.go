package routes

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// testNetns makes a network namespace of its own (removed at the end) with a veth pair d0/d1, d0
// 192.0.2.1/24 and a default route via 192.0.2.254 in it, and returns a handle in it.
func testNetns(t *testing.T) (*netlink.Handle, string) {
	t.Helper()
	name := fmt.Sprintf("krt%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ip("link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ip("link", "set", "d1", "up")
	ip("addr", "add", "192.0.2.1/24", "dev", "d0")
	ip("link", "set", "d0", "up")
	ip("route", "add", "default", "via", "192.0.2.254")
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, name
}

// routesIn is `ip -4 route show proto 0x4c` in the namespace, one route a line.
func routesIn(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-4", "route", "show", "proto", "0x4c").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestSyncInTheKernel(t *testing.T) {
	h, ns := testNetns(t)
	newC := func() *Controller {
		c, err := New(Options{Client: fake.NewClientset(), NodeName: "me", ClusterCIDR: "10.1.0.0/16", Handle: h})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newC()
	nodes := []*corev1.Node{
		node("me", "192.0.2.1", "10.1.1.0/24"),
		node("onlink", "192.0.2.2", "10.1.2.0/24"),
		node("far", "198.51.100.3", "10.1.3.0/24"),
		node("other-cluster", "192.0.2.5", "10.9.5.0/24"),
	}
	if err := c.Sync(nodes); err != nil {
		t.Fatal(err)
	}
	want := "10.1.2.0/24 via 192.0.2.2 dev d0\n10.1.3.0/24 via 192.0.2.254 dev d0"
	if got := routesIn(t, ns); normalize(got) != normalize(want) {
		t.Fatalf("routes:\n%s\nwant:\n%s", got, want)
	}

	// A route of another owner inside the cluster CIDR and one of ours outside it stay.
	if out, err := exec.Command("ip", "-n", ns, "route", "add", "10.1.200.0/24", "via", "192.0.2.9").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("ip", "-n", ns, "route", "add", "10.7.0.0/24", "via", "192.0.2.9", "proto", "0x4c").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	// Restarted: the same nodes change nothing; a node gone loses its route; a node moved
	// gets the new next hop.
	c = newC()
	if err := c.Sync(nodes); err != nil {
		t.Fatal(err)
	}
	moved := []*corev1.Node{nodes[0], node("onlink", "192.0.2.7", "10.1.2.0/24")}
	if err := c.Sync(moved); err != nil {
		t.Fatal(err)
	}
	want = "10.1.2.0/24 via 192.0.2.7 dev d0\n10.7.0.0/24 via 192.0.2.9 dev d0"
	if got := routesIn(t, ns); normalize(got) != normalize(want) {
		t.Fatalf("after the change:\n%s\nwant:\n%s", got, want)
	}

	// A node at this node's own address gets no route, and says why.
	if err := c.Sync([]*corev1.Node{node("self-addr", "192.0.2.1", "10.1.4.0/24")}); err == nil || !strings.Contains(err.Error(), "self-addr") {
		t.Errorf("a node at our own address: err %v", err)
	}

	if err := Cleanup(h, "10.1.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(h, "10.1.0.0/16"); err != nil {
		t.Fatalf("second cleanup: %v", err)
	}
	if got := routesIn(t, ns); normalize(got) != normalize("10.7.0.0/24 via 192.0.2.9 dev d0") {
		t.Fatalf("after cleanup:\n%s", got)
	}
	out, _ := exec.Command("ip", "-n", ns, "-4", "route", "show", "10.1.200.0/24").CombinedOutput()
	if !strings.Contains(string(out), "192.0.2.9") {
		t.Errorf("another owner's route was removed: %q", out)
	}
}

func normalize(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}
