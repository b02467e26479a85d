// Package netpol tests NetworkPolicy enforcement as users meet it: upstream's e2e matrix
// (internal/agent/netpol/netpoltest: pods a, b, c in namespaces x, y, z serving TCP 80 and
// 81) on real busybox pods on two nodes (test/netharness: `kube server --agent` as node A in
// the host's network namespace, a `kube agent` process as node B in its own), the nine pods
// alternating A, B, A, … so that the matrix holds pairs on one node and pairs across nodes
// (a connection between nodes is filtered twice: by the source node's egress rules and by
// the destination node's ingress rules). Each step's policies are applied through the API
// and every pod probes every pod on both ports from inside the pod (one exec per source
// pod, in parallel), the matrix compared with upstream's expected one. Also: a policy
// applied to traffic sent to a ClusterIP.
//
// Machine-wide state: the nftables table knp<pid> on both nodes (deleted at the end, pass or
// fail; node B's goes with its namespace); the harness removes the rest. The routes between
// the nodes' pod CIDRs are the agents' own (internal/agent/routes).
package netpol

import (
	"context"
	"fmt"
	"os"
	"testing"

	"kubeos.dev/kube/internal/agent"
	"kubeos.dev/kube/internal/agent/netpol"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/test/netharness"
)

var (
	cluster *netharness.Cluster
	table   = fmt.Sprintf("knp%d", os.Getpid())
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer func() {
		if err := netpol.Cleanup(context.Background(), table); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return netharness.Run(m, netharness.Options{Name: "netpol", SecondNode: true,
		Server: func(o *server.Options) {
			o.AgentNetworkPolicy = agent.NetworkPolicyOptions{Enabled: true, Table: table}
		},
		AgentArgs: []string{"--network-policy-table=" + table},
	}, &cluster)
}
