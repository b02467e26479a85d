// Package simnode tests simulated nodes (`kube server --sim-nodes`) as users meet them:
// Nodes that register and go Ready, Leases that renew, pods bound to them that go through a
// kubelet's statuses in its order, Job pods that succeed, graceful deletion, a stage table
// with failures, a node that stops heartbeating, the Node authorizer applying to the
// simulated nodes, and kubectl 1.27 and 1.33 against them.
package simnode

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
)

var srv *servertest.Server

const nodes = 5

// Test annotations selecting the extra stages of the table.
const (
	slowAnnotation  = "test.sim.kubeos.dev/slow-start"
	crashAnnotation = "test.sim.kubeos.dev/crash"
)

// stages are the defaults behind two test stages: containers of slow pods start two
// seconds after their sandbox (so a watch sees the two writes apart), and containers of
// crashing pods exit 1 a second after each start.
func stages() []simnode.Stage {
	slow := simnode.Stage{Name: "slow-start", Selector: simnode.Selector{
		MatchAnnotations: map[string]string{slowAnnotation: "true"},
		MatchExpressions: []simnode.Expression{
			{Key: ".metadata.deletionTimestamp", Operator: "DoesNotExist"},
			{Key: ".status.containerStatuses.reason", Operator: "In", Values: []string{"ContainerCreating", "PodInitializing"}}}},
		Delay: metav1.Duration{Duration: 2 * time.Second}, Next: simnode.Next{Containers: simnode.Running}}
	crash := simnode.Stage{Name: "crash", Selector: simnode.Selector{
		MatchAnnotations: map[string]string{crashAnnotation: "true"},
		MatchExpressions: []simnode.Expression{
			{Key: ".metadata.deletionTimestamp", Operator: "DoesNotExist"},
			{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
		Delay: metav1.Duration{Duration: time.Second}, Next: simnode.Next{Containers: simnode.CrashLoopBackOff, ExitCode: 1}}
	restart := simnode.Stage{Name: "fast-restart", Selector: simnode.Selector{
		MatchAnnotations: map[string]string{crashAnnotation: "true"},
		MatchExpressions: []simnode.Expression{
			{Key: ".status.containerStatuses.reason", Operator: "In", Values: []string{"CrashLoopBackOff"}}}},
		Delay: metav1.Duration{Duration: time.Second}, Backoff: true, Next: simnode.Next{Containers: simnode.Running}}
	return append([]simnode.Stage{slow, crash, restart}, simnode.DefaultStages(3*time.Second)...)
}

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var logs io.Writer // SIMNODE_TEST_LOG=1 shows the server's log
	if os.Getenv("SIMNODE_TEST_LOG") != "" {
		logs = os.Stderr
	}
	srv, err = servertest.StartWith(dir, logs, func(o *server.Options) {
		// The node lifecycle controller marks a node Unknown 10 s after its last heartbeat.
		o.NodeMonitorGracePeriod = 10 * time.Second
		o.SimNodes = simnode.Options{Nodes: nodes, LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second, Stages: stages()}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// asNode is a client that acts as node, through impersonation as the simulator does.
func asNode(t *testing.T, node string) *kubernetes.Clientset {
	t.Helper()
	cfg := adminConfig(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: simnode.NodeUser(node), Groups: []string{simnode.NodesGroup}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}
