package servicesnet

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"kubeos.dev/kube/test/netharness"
)

// TestNodeRoutes: each agent routes the other node's pod CIDR (the harness adds no route):
// on node A via node B's InternalIP, on node B via the gateway it reaches node A's address
// through (the host's veth address), both marked as Kube's (protocol 0x4c); and pods reach
// each other across the nodes by pod IP, both ways.
func TestNodeRoutes(t *testing.T) {
	eventually(t, "node A's route to node B's pods", func() error {
		return hasRoute(c.A, c.B.PodCIDR, "via "+c.B.IP)
	})
	eventually(t, "node B's route to node A's pods", func() error {
		return hasRoute(c.B, c.A.PodCIDR, "via "+c.HostVethIP())
	})
	cs := c.Clientset(t)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "web-a", c.A.Name, "web")
	backend(t, cs, ns, "web-b", c.B.Name, "web")
	pods := waitReady(t, cs, ns, "web-a", "web-b")
	for from, to := range map[string]string{"web-a": "web-b", "web-b": "web-a"} {
		url := fmt.Sprintf("http://%s:8080/", pods[to].Status.PodIP)
		eventually(t, from+" → "+to+" by pod IP", func() error {
			body, err := getFromPod(t, ns, from, url)
			if err == nil && body != to {
				err = fmt.Errorf("answer %q", body)
			}
			return err
		})
	}
}

// hasRoute says node's main table routes dst with protocol 0x4c and the words want.
func hasRoute(node netharness.Node, dst, want string) error {
	out, err := node.Command(context.Background(), "ip", "-4", "route", "show", "exact", dst, "proto", "0x4c").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route: %w: %s", err, out)
	}
	if !strings.Contains(string(out), want) {
		return fmt.Errorf("on %s: route to %s is %q, want %q (protocol 0x4c)", node.Name, dst, strings.TrimSpace(string(out)), want)
	}
	return nil
}
