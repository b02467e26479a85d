// Package scheduler tests Kube's in-process scheduler as users meet it: Node objects
// created through the API (no agents), pods created with client-go and kubectl, and the
// placements, conditions, events and metrics that come back — upstream's default profile
// semantics (node selectors and affinity, taints, host ports, topology spread, pod
// anti-affinity, resources, preemption), --scheduler-config profiles, and bad input.
package scheduler

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var srv *servertest.Server

// profileConfig is the --scheduler-config of the shared server: the default profile plus
// "spread-only", which scores by NodeResourcesFit MostAllocated (bin packing) instead.
const profileConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
      - name: ImageLocality
`

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfgFile := dir + "-scheduler.yaml"
	if err := os.WriteFile(cfgFile, []byte(profileConfig), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.Remove(cfgFile)
	srv, err = servertest.StartWith(dir, logOut(), func(o *server.Options) { o.SchedulerConfigFile = cfgFile })
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		return 1
	}
	defer srv.Stop()
	defer stopHeartbeats()
	return m.Run()
}

func clientset(t testing.TB) *kubernetes.Clientset {
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

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// nodeSpec describes a Node object for a test: capacity, labels, taints.
type nodeSpec struct {
	name          string
	cpu, memory   string
	pods          string
	labels        map[string]string
	taints        []corev1.Taint
	unschedulable bool
}

func makeNode(n nodeSpec) *corev1.Node {
	if n.pods == "" {
		n.pods = "110"
	}
	labels := map[string]string{"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux"}
	for k, v := range n.labels {
		labels[k] = v
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n.cpu), corev1.ResourceMemory: resource.MustParse(n.memory),
		corev1.ResourcePods: resource.MustParse(n.pods)}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: n.taints, Unschedulable: n.unschedulable},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}},
	}
}

// createNode creates a Node object and its status (capacity, allocatable, Ready).
func createNode(t testing.TB, cs kubernetes.Interface, s nodeSpec) {
	t.Helper()
	ctx := ctxT(t)
	n := makeNode(s)
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", s.name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = n.Status
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s status: %v", s.name, err)
	}
}

func createNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func pausePod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}

func withRequests(p *corev1.Pod, cpu, memory string) *corev1.Pod {
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return p
}

// waitScheduled waits until the pod is bound and returns its node.
func waitScheduled(t testing.TB, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	var node string
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s/%s not scheduled yet (conditions %v)", ns, name, p.Status.Conditions)
		}
		node = p.Spec.NodeName
		return nil
	})
	return node
}

// waitUnschedulable waits for PodScheduled=False reason Unschedulable and returns its message.
func waitUnschedulable(t testing.TB, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	var msg string
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			return fmt.Errorf("pod %s/%s was scheduled to %s", ns, name, p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				msg = c.Message
				return nil
			}
		}
		return fmt.Errorf("pod %s/%s has no PodScheduled=False condition yet: %v", ns, name, p.Status.Conditions)
	})
	return msg
}

// logOut is where the server logs: stderr with KUBE_TEST_LOG=1, else nowhere.
func logOut() io.Writer {
	if os.Getenv("KUBE_TEST_LOG") != "" {
		return os.Stderr
	}
	return nil
}

var (
	heartbeatStop = make(chan struct{})
	heartbeatDone sync.WaitGroup
)

// startHeartbeats renews a Lease in kube-node-lease for each node every 10 s, as a kubelet
// does, so the node lifecycle controller keeps the nodes Ready (untainted) while the tests
// run.
func startHeartbeats(cs kubernetes.Interface, nodes []string) {
	renew := func() {
		now := metav1.NewMicroTime(time.Now())
		for _, n := range nodes {
			l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &n, LeaseDurationSeconds: ptrInt32(40), RenewTime: &now}}
				_, _ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(context.Background(), l, metav1.CreateOptions{})
				continue
			}
			if err != nil {
				continue
			}
			l.Spec.RenewTime = &now
			_, _ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(context.Background(), l, metav1.UpdateOptions{})
		}
	}
	renew()
	heartbeatDone.Go(func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-heartbeatStop:
				return
			case <-tick.C:
				renew()
			}
		}
	})
}

func stopHeartbeats() {
	close(heartbeatStop)
	heartbeatDone.Wait()
}

func ptrInt32(v int32) *int32 { return &v }
