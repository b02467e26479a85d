package servicesnet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"kubeos.dev/kube/internal/agent/netpol"
)

// TestCleanup: `kube agent --cleanup` in node B's namespace (its agent stopped) removes the
// Service proxy's and the NetworkPolicy nftables tables (checked over netlink), the DNS
// link, the Service CIDR's unreachable route and the route to node A's pods, exits 0, and
// does so again when there is nothing left; a restarted agent puts it all back.
func TestCleanup(t *testing.T) {
	ctx := ctxT(t, 3*time.Minute)
	tables := []string{c.B.Table, netpol.DefaultTable}
	eventually(t, "node B's tables before the cleanup", func() error {
		have, err := nftTables(c.B.Netns)
		if err != nil {
			return err
		}
		for _, tb := range tables {
			if !slices.Contains(have, tb) {
				return fmt.Errorf("table %s missing: %v", tb, have)
			}
		}
		return hasRoute(c.B, c.A.PodCIDR, "via")
	})
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = c.StartAgentB()
		}
	})
	for round := 1; round <= 2; round++ {
		out, err := c.CleanupNodeB(ctx)
		if err != nil {
			t.Fatalf("round %d: kube agent --cleanup: %v\n%s", round, err, out)
		}
		t.Logf("round %d:\n%s", round, out)
		have, err := nftTables(c.B.Netns)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if slices.Contains(have, tb) {
				t.Errorf("round %d: table ip %s still there (tables %v)", round, tb, have)
			}
		}
		for _, check := range [][]string{
			{"ip", "-4", "route", "show", "proto", "0x4c"},
			{"ip", "-4", "route", "show", "proto", "0x4b"},
			{"ip", "-4", "route", "show", "type", "unreachable"},
			{"ip", "-o", "link", "show", "type", "dummy"},
			{"ip", "-o", "link", "show", "kube-dns0"},
		} {
			o, _ := c.B.Command(ctx, check[0], check[1:]...).CombinedOutput()
			if s := strings.TrimSpace(string(o)); s != "" && !strings.Contains(s, "does not exist") {
				t.Errorf("round %d: %v still shows %q", round, check, s)
			}
		}
	}
	if err := c.StartAgentB(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, "node B's tables and routes back after a restart", func() error {
		have, err := nftTables(c.B.Netns)
		if err != nil {
			return err
		}
		for _, tb := range tables {
			if !slices.Contains(have, tb) {
				return fmt.Errorf("table %s missing: %v", tb, have)
			}
		}
		return hasRoute(c.B, c.A.PodCIDR, "via")
	})
}

// nftTables are the names of the ip-family tables in the named network namespace, over
// netlink (google/nftables).
func nftTables(ns string) ([]string, error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return nil, err
	}
	ts, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out, nil
}
