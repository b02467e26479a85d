// Package twonode runs upstream's NetworkPolicy e2e matrix (test/netpol/matrix) across two
// nodes: `kube server --agent` (node A, the host's network namespace) and a `kube agent`
// process in its own network namespace (node B, test/netharness), with the nine pods
// alternating between them, so that a connection between nodes is filtered twice: by the
// source node's egress rules and by the destination node's ingress rules.
//
// Machine-wide state: the nftables table knp<pid> on both nodes (deleted at the end; node
// B's goes with its namespace) and the routes between the nodes' pod CIDRs (host → node B
// through the veth, node B → node A through the host), removed at the end; the harness
// removes the rest.
package twonode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/netpol"
	"kubeos.dev/kube/internal/agent/netpol/netpoltest"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/test/netharness"
	"kubeos.dev/kube/test/netpol/matrix"
)

var (
	cluster *netharness.Cluster
	table   = fmt.Sprintf("knp%d", os.Getpid())
	routes  [][]string // commands undoing the routes added
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer func() {
		for _, r := range routes {
			_ = exec.Command(r[0], r[1:]...).Run()
		}
		if err := netpol.Cleanup(context.Background(), table); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return netharness.Run(m, netharness.Options{Name: "netpol2", SecondNode: true,
		Server: func(o *server.Options) {
			o.AgentNetworkPolicy = agent.NetworkPolicyOptions{Enabled: true, Table: table}
		},
		AgentArgs: []string{"--network-policy-table=" + table},
	}, &cluster)
}

// routeNodes routes each node's pod CIDR to the other node (the agents do not route
// between nodes yet).
func routeNodes() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range [][]string{
		{"ip", "route", "replace", cluster.B.PodCIDR, "via", cluster.B.IP},
		{"ip", "-n", cluster.B.Netns, "route", "replace", cluster.A.PodCIDR, "via", cluster.HostVethIP()},
	} {
		if out, err := exec.CommandContext(ctx, r[0], r[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(r, " "), err, out)
		}
		undo := append([]string{}, r...)
		for i, a := range undo {
			if a == "replace" {
				undo[i] = "del"
			}
		}
		routes = append(routes, undo)
	}
	return nil
}

var (
	modelOnce sync.Once
	theModel  *matrix.Model
	modelErr  error
)

// setup routes the nodes and makes the nine pods, alternating A, B, A, … in x/a … z/c order.
func setup(t *testing.T) *matrix.Model {
	t.Helper()
	modelOnce.Do(func() {
		if modelErr = routeNodes(); modelErr != nil {
			return
		}
		index := map[string]int{}
		for i, p := range netpoltest.AllPods() {
			index[p] = i
		}
		theModel, modelErr = matrix.New(t, cluster, func(pod string) netharness.Node {
			if index[pod]%2 == 0 {
				return cluster.A
			}
			return cluster.B
		})
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return theModel
}

// TestUpstreamMatrix runs upstream's e2e cases in order over pods on both nodes.
func TestUpstreamMatrix(t *testing.T) {
	setup(t).Run(t, cluster.Logf)
}
