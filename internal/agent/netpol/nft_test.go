package netpol

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/google/nftables"

	"kubeos.dev/kube/internal/agent/netpol/netpoltest"
)

// netns makes a network namespace for the test (removed at its end) and returns its name
// and an open descriptor.
func netns(t *testing.T) (string, int) {
	t.Helper()
	name := fmt.Sprintf("knp-unit-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return name, int(f.Fd())
}

// listing is `nft list table` in ns, its lines sorted (chains and sets in any order).
func listing(t *testing.T, ns, table string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestTableIncremental: after each of the matrix's steps programmed incrementally, the
// kernel holds what a fresh table of that step holds; and Cleanup removes it.
func TestTableIncremental(t *testing.T) {
	ns, fd := netns(t)
	env := modelEnv()
	inc := NewTable("inc", nftables.WithNetNSFd(fd))
	for _, c := range netpoltest.Cases() {
		prog, _ := Compute(modelState(c, env, func(p string) bool { return p[:1] != "z" }))
		if err := inc.Sync(prog); err != nil {
			t.Fatalf("%s: incremental: %v", c.Name, err)
		}
		if inc.applied == nil {
			t.Fatalf("%s: not applied", c.Name)
		}
		fresh := NewTable("inc-fresh", nftables.WithNetNSFd(fd))
		if err := fresh.Sync(prog); err != nil {
			t.Fatalf("%s: fresh: %v", c.Name, err)
		}
		got := strings.ReplaceAll(listing(t, ns, "inc"), "table ip inc {", "")
		want := strings.ReplaceAll(listing(t, ns, "inc-fresh"), "table ip inc-fresh {", "")
		if got != want {
			t.Fatalf("%s: incremental table differs from a fresh one:\n%s\n---- fresh:\n%s", c.Name, got, want)
		}
	}
	if !strings.Contains(listing(t, ns, "inc"), "hook forward") {
		t.Fatal("no forward hook chain")
	}
	// A restarted agent: a new Table over the existing one replaces it in one transaction.
	before := listing(t, ns, "inc")
	prog, _ := Compute(modelState(netpoltest.Cases()[len(netpoltest.Cases())-1], env, func(p string) bool { return p[:1] != "z" }))
	if err := NewTable("inc", nftables.WithNetNSFd(fd)).Sync(prog); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if after := listing(t, ns, "inc"); after != before {
		t.Fatalf("restart changed the table:\n%s\n---- before:\n%s", after, before)
	}
	for _, name := range []string{"inc", "inc-fresh"} {
		if err := cleanupIn(name, nftables.WithNetNSFd(fd)); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "tables").CombinedOutput()
	if strings.Contains(string(out), "inc") {
		t.Fatalf("tables left: %s", out)
	}
}

// TestTableEdges: sets reaching 0.0.0.0 and 255.255.255.255 (ipBlock 0.0.0.0/0 with an
// except), an empty set, and growing and shrinking neighbouring intervals.
func TestTableEdges(t *testing.T) {
	ns, fd := netns(t)
	tb := NewTable("edges", nftables.WithNetNSFd(fd))
	pod := netip.MustParseAddr("10.1.0.2")
	h := func(s string) Interval { return hostInterval(netip.MustParseAddr(s)) }
	steps := []map[string][]Interval{
		{"all": {{0, math.MaxUint32}}, "empty": nil, "n": {h("10.0.0.1")}},
		{"all": subtract([]Interval{{0, math.MaxUint32}}, []Interval{h("10.0.0.0")}), "empty": nil, "n": normalize([]Interval{h("10.0.0.1"), h("10.0.0.2")})},
		{"all": subtract([]Interval{{0, math.MaxUint32}}, []Interval{h("0.0.0.0"), h("255.255.255.255")}), "n": {h("10.0.0.2")}},
		{"n": normalize([]Interval{h("10.0.0.1"), h("10.0.0.2"), h("10.0.0.3")})},
	}
	want := []string{
		"elements = { 0.0.0.0/0 }",
		"elements = { 0.0.0.0-9.255.255.255, 10.0.0.1-255.255.255.255 }",
		"elements = { 0.0.0.1-255.255.255.254 }",
		"elements = { 10.0.0.1-10.0.0.3 }",
	}
	for i, sets := range steps {
		rules := []Rule{}
		for name := range sets {
			rules = append(rules, Rule{Set: name})
		}
		prog := Program{Sets: sets, Pods: map[netip.Addr]PodProgram{pod: {Pod: "a/p", Ingress: &Chain{Rules: rules}}}}
		if err := tb.Sync(prog); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := listing(t, ns, "edges"); !strings.Contains(got, want[i]) {
			t.Errorf("step %d: no %q in\n%s", i, want[i], got)
		}
	}
}
