// Package netpol tests NetworkPolicy enforcement as users meet it: upstream's e2e matrix
// (internal/agent/netpol/netpoltest: pods a, b, c in namespaces x, y, z serving TCP 80 and
// 81) on real busybox pods of `kube server --agent` (test/netharness), each step's
// policies applied through the API and every pod probing every pod on both ports from
// inside the pod (one exec per source pod, in parallel), the matrix compared with
// upstream's expected one; and a policy applied to traffic sent to a ClusterIP.
//
// The nftables table is this process's own (knp<pid>) and is deleted at the end, pass or
// fail; the harness removes the rest.
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
	return netharness.Run(m, netharness.Options{Name: "netpol", Server: func(o *server.Options) {
		o.AgentNetworkPolicy = agent.NetworkPolicyOptions{Enabled: true, Table: table}
	}}, &cluster)
}
