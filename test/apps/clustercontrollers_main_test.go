package apps

// The clustercontrollers suite tests the cluster controllers (EndpointSlice, EndpointSlice
// mirroring, Endpoints, node lifecycle and taint eviction, node IPAM, ResourceQuota, pod
// GC, PV binding and protection, HPA, bootstrap tokens, TTL, ephemeral volumes) as a user
// meets them, against its own in-process server on embedded etcd with short controller periods.
// Nodes are test fixtures: the test creates them and renews (or stops renewing) their
// Leases in kube-node-lease and writes pods' status as their kubelet would.

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var clusterSrv *servertest.Server

// Controller settings of the test server (short periods instead of minutes).
const (
	monitorGrace      = 5 * time.Second
	terminatedGCLimit = 5
	clusterCIDR       = "10.250.0.0/20" // 16 node blocks of /24
)

var clusterSuite = servertest.NewFixture("clustercontrollers", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	var logOut io.Writer // KUBE_TEST_LOG=1 shows the server's logs
	if os.Getenv("KUBE_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	clusterSrv, err = servertest.StartWith(dir, logOut, func(o *server.Options) {
		c := &o.ClusterControllerOptions
		c.NodeMonitorPeriod = time.Second
		c.NodeMonitorGracePeriod = monitorGrace
		c.NodeStartupGracePeriod = 10 * time.Second
		c.PodGCPeriod = time.Second
		c.PodGCQuarantine = 2 * time.Second
		c.TerminatedPodGCThreshold = terminatedGCLimit
		c.HPASyncPeriod = time.Second
		c.ClusterCIDR = clusterCIDR
		c.PVClaimBinderSyncPeriod = time.Second
	})
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	stop := make(chan struct{})
	go heartbeats.run(stop)
	fx.Cleanup(func() {
		close(stop)
		clusterSrv.Stop()
		os.RemoveAll(dir)
	})
	return nil
})

func client(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clusterSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func clusterCtxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// clusterNamespace creates a namespace for the test, deleted at its end.
func clusterNamespace(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// heartbeats renews the kube-node-lease Leases of live fixture nodes every second, as
// their kubelets would.
var heartbeats = &heartbeater{live: map[string]bool{}}

type heartbeater struct {
	mu   sync.Mutex
	live map[string]bool
}

func (h *heartbeater) set(name string, live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if live {
		h.live[name] = true
	} else {
		delete(h.live, name)
	}
}

func (h *heartbeater) run(stop <-chan struct{}) {
	cfg, err := clusterSrv.Config()
	if err != nil {
		panic(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		h.mu.Lock()
		var names []string
		for n := range h.live {
			names = append(names, n)
		}
		h.mu.Unlock()
		for _, n := range names {
			_ = renewLease(context.Background(), cs, n)
		}
	}
}

// renewLease creates or renews node's Lease.
func renewLease(ctx context.Context, cs kubernetes.Interface, node string) error {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		dur := int32(40)
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// liveNode creates a Ready node whose Lease is renewed until the test ends (then the node
// is deleted). Labels go on the node (zone labels).
func liveNode(t *testing.T, cs kubernetes.Interface, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		heartbeats.set(name, false)
		_ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if err := renewLease(ctx, cs, name); err != nil {
		t.Fatal(err)
	}
	heartbeats.set(name, true)
	n, err = postReady(ctx, cs, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// postReady writes node's status as its kubelet would: Ready=True, heartbeat now, an
// InternalIP address.
func postReady(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, error) {
	var out *corev1.Node
	// the node IPAM and TTL controllers write the node too
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}}
		out, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// runningPod creates a pod bound to node and writes its status Running with ip, Ready as
// ready says (what a kubelet reports).
func runningPod(t *testing.T, cs kubernetes.Interface, ns string, pod *corev1.Pod, node, ip string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod.Namespace = ns
	pod.Spec.NodeName = node
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	}
	p, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err = setPodStatus(ctx, cs, p, ip, ready)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func setPodStatus(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, ip string, ready bool) (*corev1.Pod, error) {
	p = p.DeepCopy()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.HostIP = "192.0.2.10"
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
	}
	return cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}
