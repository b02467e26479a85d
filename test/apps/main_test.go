// Package apps tests the workload and cluster controllers as users meet them, in four
// suites that each start their own in-process server when their first test runs
// (servertest.Fixture; one test binary instead of four, each of which linked the whole
// server):
//
//   - apps (workloads_*_test.go, named to sort last: its tests run in parallel, after every
//     other suite's, with the other suites' servers stopped): kubectl 1.27 and
//     1.33 (rollout, scale, drain, wait) and client-go against a server whose Deployments,
//     ReplicaSets, ReplicationControllers, StatefulSets, DaemonSets, Jobs, CronJobs and
//     PodDisruptionBudgets are driven by the server's own controllers, its scheduler and its
//     simulated nodes (kube server --sim-nodes).
//   - controllers (controllers_*_test.go): garbage collection and namespace deletion with
//     kubectl 1.33.
//   - clustercontrollers (clustercontrollers_*_test.go): the cluster controllers with short
//     periods, nodes and kubelets played by the test.
//   - helm (helm*_test.go): Helm 3 as a real client, on simulated nodes.
package apps

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
)

var srv *servertest.Server

// simNodes is how many simulated nodes (sim-1 … sim-4) the server runs; the real
// scheduler places the pods.
const simNodes = 4

// StartDelayAnnotation on a pod delays its simulated containers' start (a Go duration),
// so it becomes Ready that long after it was scheduled.
const StartDelayAnnotation = "apps.test/start-delay"

// ExitLabel on a pod of restartPolicy Never or OnFailure makes its simulated containers
// exit with that code (1 or 42) once running, instead of 0 after the run time.
const ExitLabel = "apps.test/exit"

// TestMain stops the suites' fixtures that the chosen tests started; each test names its
// suite's fixture (appsSuite.Need(t) …) in its first line.
func TestMain(m *testing.M) {
	os.Exit(servertest.Main(m, appsSuite, controllersSuite, clusterSuite, helmSuite))
}

var appsSuite = servertest.NewFixture("apps", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	// KUBE_TEST_LOG=1 shows the server's warnings and errors.
	var logOut io.Writer
	if os.Getenv("KUBE_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	srv, err = servertest.StartWith(dir, logOut, func(o *server.Options) {
		o.SimNodes = simnode.Options{Nodes: simNodes, JobRunTime: time.Second, Stages: stages(time.Second)}
	})
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { srv.Stop() })
	return nil
})

// stages are the simulator's default pod lifecycle with the start delayed by
// StartDelayAnnotation, plus, before a job pod's normal
// completion, an exit with the code its ExitLabel names.
func stages(jobRunTime time.Duration) []simnode.Stage {
	var st []simnode.Stage
	for _, s := range simnode.DefaultStages(jobRunTime) {
		if s.Name == "pod-start" {
			s.DelayAnnotation = StartDelayAnnotation
		}
		if s.Name == "pod-complete" {
			for _, code := range []int32{1, 42} {
				st = append(st, simnode.Stage{
					Name: fmt.Sprintf("exit-%d", code),
					Selector: simnode.Selector{MatchLabels: map[string]string{ExitLabel: fmt.Sprint(code)}, MatchExpressions: []simnode.Expression{
						{Key: ".spec.restartPolicy", Operator: "In", Values: []string{"Never", "OnFailure"}},
						{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
					Next: simnode.Next{Containers: simnode.Terminated, ExitCode: code},
				})
			}
		}
		st = append(st, s)
	}
	return st
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// podsOf lists the pods of ns matching selector.
func podsOf(t *testing.T, cs kubernetes.Interface, ns, selector string) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// eventually polls f every 100 ms for up to d (a deadline, not a measurement).
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	servertest.Eventually(t, d, 100*time.Millisecond, f)
}

// kubectl runs one kubectl binary with its own HOME and discovery cache.
type kubectl struct {
	t    *testing.T
	bin  string
	home string
}

func newKubectl(t *testing.T, version string) *kubectl {
	t.Helper()
	bin, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, bin: bin, home: t.TempDir()}
}

func (k *kubectl) run(stdin string, args ...string) (string, error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + k.home, "KUBECONFIG=" + srv.Kubeconfig, "KUBECACHEDIR=" + filepath.Join(k.home, "cache")}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	k.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

func (k *kubectl) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// contains fails the test unless out holds every want.
func contains(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

func selector(m map[string]string) string { return labels.SelectorFromSet(m).String() }

// dumpOnFailure prints what the namespace holds (workloads, pods, events) when the test
// fails, to show where a controller stopped.
func dumpOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		k := newKubectl(t, "1.33")
		k.run("", "-n", ns, "get", "deploy,rs,rc,sts,ds,job,cronjob,pdb,pvc,pods,controllerrevisions", "-o", "wide")
		k.run("", "-n", ns, "get", "events", "--sort-by=.metadata.creationTimestamp")
		k.run("", "get", "nodes", "-o", "custom-columns=NAME:.metadata.name,TAINTS:.spec.taints,UNSCHED:.spec.unschedulable,READY:.status.conditions[0].status")
	})
}
