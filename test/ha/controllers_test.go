package ha

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest/kubeproc"
)

// The controllers' reliability as a user sees it (issue 15, "Reliability"): `kube server`
// runs as a process on simulated nodes and is killed with SIGKILL mid-work; after a
// restart on the same data directory (or on the other server of two), the work finishes
// with nothing done twice and nothing lost. The controllers keep nothing in memory that
// their caches cannot rebuild; these tests are what proves it.

// kubeBinary is the kube binary the tests run: $KUBE_TEST_BINARY when set (a build of
// this checkout made beforehand: linking under load takes many minutes), else
// kubeproc.BuildKube's.
func kubeBinary(t *testing.T, dir string) string {
	if bin := os.Getenv("KUBE_TEST_BINARY"); bin != "" {
		return bin
	}
	return kubeproc.BuildKube(t, dir)
}

// kubeServer is one `kube server` process and the arguments to start it again.
type kubeServer struct {
	*proc
	args []string
	dir  string // its data directory
	port int
	cs   *kubernetes.Clientset // requests time out after 20 s
	cfgW *kubernetes.Clientset // no timeout, for informers' watches
}

// startKube starts `kube server` with args (after the data directory and port) and waits
// until it is ready.
func startKube(t *testing.T, bin, name, dir string, port int, args ...string) *kubeServer {
	t.Helper()
	full := append([]string{bin, "server", "--data-dir", dir, "--secure-port", fmt.Sprint(port), "--log-level", "warn"}, args...)
	s := &kubeServer{args: full, dir: dir, port: port}
	s.restart(t, name)
	return s
}

// restart starts the process again with the same arguments (after a kill).
func (s *kubeServer) restart(t *testing.T, name string) {
	t.Helper()
	s.proc = start(t, name, "Kube is ready", s.args...)
	s.waitReady(t, 3*time.Minute)
	if s.cs != nil {
		return
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	if s.cfgW, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 20 * time.Second
	if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podWatch follows the pods of one label selector through an informer (across server
// restarts: client-go's reflector resumes or lists again) and checks, at every event, what
// a user watching them could see.
type podWatch struct {
	mu sync.Mutex
	// mostLive is the most non-terminating pods seen at one moment; leastReady the fewest
	// Ready non-terminating ones once tracking began.
	mostLive, leastReady int
	// vanished are pods that went without having been seen terminating (deleted by no one
	// the user could see).
	vanished []string
	tracking bool
	store    cache.Store
}

func watchPods(t *testing.T, cs kubernetes.Interface, ns, selector string) *podWatch {
	t.Helper()
	w := &podWatch{leastReady: 1 << 30}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	w.store = inf.GetStore()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.tally() },
		UpdateFunc: func(_, _ any) { w.tally() },
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
				w.mu.Lock()
				w.vanished = append(w.vanished, p.Name)
				w.mu.Unlock()
			}
			w.tally()
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return w
}

func (w *podWatch) tally() {
	live, ready := 0, 0
	for _, o := range w.store.List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live++
		if podReady(p) {
			ready++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tracking {
		w.mostLive, w.leastReady = max(w.mostLive, live), min(w.leastReady, ready)
	}
}

func (w *podWatch) track() {
	w.mu.Lock()
	w.tracking = true
	w.mu.Unlock()
	w.tally()
}

func (w *podWatch) result() (mostLive, leastReady int, vanished []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mostLive, w.leastReady, slices.Clone(w.vanished)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolloutDone says whether a Deployment's rollout is complete as `kubectl rollout status`
// decides it, plus the Progressing reason upstream sets at the end.
func rolloutDone(d *appsv1.Deployment) error {
	s, want := d.Status, *d.Spec.Replicas
	if s.ObservedGeneration < d.Generation {
		return fmt.Errorf("observedGeneration %d < generation %d", s.ObservedGeneration, d.Generation)
	}
	if s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want || s.ReadyReplicas != want {
		return fmt.Errorf("updated %d, replicas %d, ready %d, available %d; want %d each", s.UpdatedReplicas, s.Replicas, s.ReadyReplicas, s.AvailableReplicas, want)
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason != "NewReplicaSetAvailable" {
			return fmt.Errorf("Progressing: %s", c.Reason)
		}
	}
	return nil
}

func deployment(name string, replicas int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
			},
		},
	}
}

// updateImage starts a rollout: the pod template's image becomes image.
func updateImage(t *testing.T, cs kubernetes.Interface, ns, name, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, image)
	if _, err := cs.AppsV1().Deployments(ns).Patch(context.Background(), name, "application/strategic-merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond (errors are its reason to wait) every 200 ms until it returns nil.
func waitFor(t *testing.T, timeout time.Duration, what string, dump func() string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v\n%s", what, timeout, err, dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// auditPolicy records every write at Metadata level.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Metadata
`

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// controllerWrites are the writes in an audit log made by the elected controllers'
// identities (users), leader-election Lease requests aside. The lifecycle identity is left
// out: every server also uses it at its start, not elected, to install the kubeos.dev
// CRDs, the tenant ClusterRoles and the default Alerts (startLifecycle).
func controllerWrites(t *testing.T, path string, users map[string]bool) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || !users[ev.User.Username] {
			continue
		}
		if ev.ObjectRef != nil && ev.ObjectRef.Resource == "leases" && ev.ObjectRef.Namespace == "kube-system" && strings.HasPrefix(ev.ObjectRef.Name, "kube-") {
			continue
		}
		if ev.User.Username == "system:kube-controller:lifecycle" {
			continue
		}
		out = append(out, ev.User.Username+" "+ev.Verb+" "+ev.RequestURI)
	}
	return out
}

// TestControllersFailOver: two `kube server` processes on one etcd, on simulated nodes.
// Only the first's controllers lead: every controller Lease names it, and the second's
// audit log holds no write by a controller identity. The first is killed with SIGKILL in
// the middle of a rolling update; the second takes the Leases and finishes the rollout.
func TestControllersFailOver(t *testing.T) {
	const replicas = 100
	begin := time.Now()
	dir := t.TempDir()
	bin := kubeBinary(t, dir)
	ports := freePorts(t, 4)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	etcd := start(t, "etcd", "serving clients", bin, "etcd", "--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--initial-cluster", fmt.Sprintf("e1=http://127.0.0.1:%d", ports[1]))
	etcd.waitReady(t, 30*time.Second)
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	common := func(i int) []string {
		a := []string{"--etcd-servers", etcdURL, "--sim-nodes", "5", "--audit-policy-file", policy,
			"--audit-log-path", filepath.Join(dir, fmt.Sprintf("audit-s%d.log", i))}
		if i > 1 {
			a = append(a, "--pki-dir", filepath.Join(dir, "s1", "pki"))
		}
		return a
	}
	s1 := startKube(t, bin, "server s1", filepath.Join(dir, "s1"), ports[2], common(1)...)
	ctx := context.Background()
	// s1 leads every controller before s2 starts.
	leases := func(cs kubernetes.Interface) (map[string]string, error) {
		l, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		holders := map[string]string{}
		for _, x := range l.Items {
			if strings.HasPrefix(x.Name, "kube-") && x.Spec.HolderIdentity != nil {
				holders[x.Name] = *x.Spec.HolderIdentity
			}
		}
		return holders, nil
	}
	heldBy := func(cs kubernetes.Interface, port int, names ...string) error {
		h, err := leases(cs)
		if err != nil {
			return err
		}
		for _, n := range names {
			if !strings.HasSuffix(h[n], fmt.Sprintf(":%d", port)) {
				return fmt.Errorf("Lease %s held by %q", n, h[n])
			}
		}
		return nil
	}
	key := []string{"kube-deployment-controller", "kube-replicaset-controller", "kube-scheduler", "kube-sim-nodes"}
	dump1 := func() string { return tail(s1.out.String(), 20) }
	waitFor(t, time.Minute, "s1 leading", dump1, func() error { return heldBy(s1.cs, s1.port, key...) })
	s2 := startKube(t, bin, "server s2", filepath.Join(dir, "s2"), ports[3], common(2)...)
	dump := func() string {
		return "--- s1\n" + tail(s1.out.String(), 20) + "\n--- s2\n" + tail(s2.out.String(), 20)
	}
	t.Logf("etcd and two servers up after %s", time.Since(begin).Round(time.Millisecond))

	ns := "failover"
	createNamespace(t, s2.cs, ns)
	deps := s2.cs.AppsV1().Deployments(ns) // through the follower: its API serves, its controllers do not act
	if _, err := deps.Create(ctx, deployment("web", replicas, intstr.FromInt32(10), intstr.FromInt32(0)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Minute, "100 pods available", dump, func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return rolloutDone(d)
	})
	// Every controller Lease is s1's; the identities that hold them are the ones that must
	// not write through s2.
	holders, err := leases(s2.cs)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for name, holder := range holders {
		if !strings.HasSuffix(holder, fmt.Sprintf(":%d", s1.port)) {
			t.Errorf("Lease %s held by %q, not s1", name, holder)
		}
		users["system:kube-controller:"+strings.TrimPrefix(name, "kube-")] = true
	}
	if len(holders) < 20 {
		t.Errorf("only %d controller Leases: %v", len(holders), holders)
	}

	updateImage(t, s2.cs, ns, "web", "registry.example/app:v2")
	waitFor(t, 5*time.Minute, "a third of the pods updated", dump, func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.UpdatedReplicas < replicas/3 {
			return fmt.Errorf("updated %d", d.Status.UpdatedReplicas)
		}
		return nil
	})
	if w := controllerWrites(t, filepath.Join(dir, "audit-s2.log"), users); len(w) > 0 {
		t.Errorf("the follower's controllers wrote %d times while s1 led, first: %v", len(w), w[:min(len(w), 5)])
	}
	if w := controllerWrites(t, filepath.Join(dir, "audit-s1.log"), users); len(w) == 0 {
		t.Error("the leader's audit log holds no controller write (the audit check sees nothing)")
	}
	s1.kill()
	killed := time.Now()
	t.Logf("killed s1 with SIGKILL mid-rollout after %s", time.Since(begin).Round(time.Millisecond))
	waitFor(t, time.Minute, "s2 taking the Leases", dump, func() error { return heldBy(s2.cs, s2.port, key...) })
	t.Logf("s2 leads after %s", time.Since(killed).Round(time.Millisecond))
	waitFor(t, 5*time.Minute, "the rollout finished by s2", dump, func() error {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return rolloutDone(d)
	})
	if w := controllerWrites(t, filepath.Join(dir, "audit-s2.log"), users); len(w) == 0 {
		t.Error("s2 finished the rollout without a controller write in its audit log")
	}
	t.Logf("done after %s", time.Since(begin).Round(time.Millisecond))
}
