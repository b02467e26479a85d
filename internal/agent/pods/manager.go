package pods

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	resourcehelper "k8s.io/component-helpers/resource"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubeos.dev/kube/internal/agent/cgroups"
)

// Options configure a Manager.
type Options struct {
	// NodeName is the node whose pods run here.
	NodeName string
	// Client acts as the node (system:node:<name>).
	Client kubernetes.Interface
	// Runtime and Images are the CRI services.
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// RootDir holds pod volumes (RootDir/pods/<uid>/volumes/<name>); LogDir the CRI logs
	// (LogDir/<ns>_<pod>_<uid>/<container>/<n>.log).
	RootDir, LogDir string
	// ClusterDNS and ClusterDomain make ClusterFirst pods' resolv.conf.
	ClusterDNS    []string
	ClusterDomain string
	// HostDNS is the resolv.conf of dnsPolicy Default.
	HostDNS func() (servers, searches, options []string)
	// Allocatable is the node's allocatable resources (downward API limits).
	Allocatable func() corev1.ResourceList
	// HostIP is the node's address in pod status.
	HostIP func() string
	// Cgroups, when set, gives every pod its cgroup in the kubelet's QoS hierarchy (the
	// sandbox's CgroupParent); nil leaves the cgroups to the runtime's defaults.
	Cgroups *cgroups.Hierarchy
	// Admit, when set, is asked once for each new pod before anything of it runs; a
	// refusal (ok false) fails the pod as the kubelet's rejectPod does: phase Failed with
	// reason and "Pod was rejected: "+message, and a warning event.
	Admit func(pod *corev1.Pod) (reason, message string, ok bool)
	// Log receives the manager's messages.
	Log *slog.Logger
}

// Manager runs the node's pods.
type Manager struct {
	opts     Options
	informer cache.SharedIndexInformer
	// services are every Service, for the containers' service environment (serviceEnv).
	services cache.SharedIndexInformer
	recorder record.EventRecorder
	probes   *probes

	mu      sync.Mutex
	workers map[types.UID]*worker
	ctx     context.Context
}

// New makes a Manager; Start runs it.
func New(o Options) *Manager {
	m := &Manager{opts: o, workers: map[types.UID]*worker{}}
	if m.opts.HostDNS == nil {
		m.opts.HostDNS = func() ([]string, []string, []string) { return nil, nil, nil }
	}
	if m.opts.Allocatable == nil {
		m.opts.Allocatable = func() corev1.ResourceList { return nil }
	}
	if m.opts.HostIP == nil {
		m.opts.HostIP = func() string { return "" }
	}
	factory := informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
	}))
	m.informer = factory.Core().V1().Pods().Informer()
	m.services = informers.NewSharedInformerFactory(o.Client, 0).Core().V1().Services().Informer()
	m.probes = newProbes(o.Runtime.ExecSync, m.event)
	return m
}

func (m *Manager) event(pod *corev1.Pod, reason, msg string) {
	typ := corev1.EventTypeNormal
	switch reason {
	case "Unhealthy", "BackOff", "Failed", "FailedMount", "FailedCreatePodSandBox", "FailedKillPod", "FailedPostStartHook", "FailedPreStopHook":
		typ = corev1.EventTypeWarning
	}
	if m.recorder != nil {
		m.recorder.Event(pod, typ, reason, msg)
	}
}

// Start runs the informer, the pod workers and the housekeeping that removes sandboxes of
// pods no longer bound here; it blocks until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	m.ctx = ctx
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.opts.Client.CoreV1().Events("")})
	defer b.Shutdown()
	m.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: m.opts.NodeName})
	for _, d := range []string{m.opts.RootDir, m.opts.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("pods: %w", err)
		}
	}
	_, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.enqueue(obj) },
		UpdateFunc: func(_, obj any) { m.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			m.enqueue(obj)
		},
	})
	if err != nil {
		return err
	}
	go m.informer.Run(ctx.Done())
	go m.services.Run(ctx.Done())
	// As the kubelet, no container starts before the Services were read once: its
	// environment would lack their variables.
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced, m.services.HasSynced) {
		return ctx.Err()
	}
	go m.relist(ctx)
	// Pods whose containers run but which were not seen yet (the agent restarted) get a
	// worker from the informer's initial list; sandboxes of pods gone meanwhile go here.
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		m.housekeeping(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (m *Manager) enqueue(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[pod.UID]
	if !ok {
		if m.ctx == nil {
			return
		}
		w = newWorker(m, pod)
		m.workers[pod.UID] = w
		go func() {
			w.run(m.ctx)
			m.mu.Lock()
			delete(m.workers, pod.UID)
			m.mu.Unlock()
		}()
		return
	}
	w.poke()
}

// pod returns the informer's pod of key with uid (nil: gone).
func (m *Manager) pod(key string, uid types.UID) *corev1.Pod {
	obj, ok, _ := m.informer.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	p := obj.(*corev1.Pod)
	if p.UID != uid {
		return nil
	}
	return p
}

// Pods are the pods bound to the node, as the informer has them.
func (m *Manager) Pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, obj := range m.informer.GetStore().List() {
		out = append(out, obj.(*corev1.Pod))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// housekeeping stops and removes sandboxes whose pod is neither known nor has a worker,
// then the pod cgroups no sandbox, worker or known pod accounts for (left by a crash
// between a pod's teardown and its cgroup's removal), as the kubelet's
// cleanupOrphanedPodCgroups does.
func (m *Manager) housekeeping(ctx context.Context) {
	sbs, err := m.opts.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		m.opts.Log.Warn("list sandboxes", "err", err)
		return
	}
	live := map[types.UID]bool{}
	for _, sb := range sbs {
		uid := types.UID(sb.Labels[labelPodUID])
		key := sb.Labels[labelPodNamespace] + "/" + sb.Labels[labelPodName]
		m.mu.Lock()
		_, working := m.workers[uid]
		m.mu.Unlock()
		if working || m.pod(key, uid) != nil {
			live[uid] = true
			continue
		}
		m.opts.Log.Info("removing sandbox of a pod no longer here", "pod", key, "uid", uid, "sandbox", sb.Id)
		m.teardownSandbox(ctx, sb.Id, 2)
		m.removePodCgroup(uid)
		_ = os.RemoveAll(filepath.Join(m.opts.RootDir, "pods", string(uid)))
	}
	m.removeOrphanCgroups(live)
	m.setBurstableShares()
}

// removeOrphanCgroups removes the pod cgroups of uids that are not live, have no worker and
// no pod in the informer. A cgroup that still holds processes stays until a later round.
func (m *Manager) removeOrphanCgroups(live map[types.UID]bool) {
	if m.opts.Cgroups == nil {
		return
	}
	known := map[types.UID]bool{}
	for _, p := range m.Pods() {
		known[p.UID] = true
	}
	for _, uid := range m.opts.Cgroups.PodUIDs() {
		m.mu.Lock()
		_, working := m.workers[uid]
		m.mu.Unlock()
		if live[uid] || known[uid] || working {
			continue
		}
		if err := m.opts.Cgroups.RemovePod(uid); err != nil {
			m.opts.Log.Debug("orphan pod cgroup not removed yet", "uid", uid, "err", err)
			continue
		}
		m.opts.Log.Info("removed the cgroup of a pod no longer here", "uid", uid)
	}
}

// removePodCgroup removes the pod's cgroup once its sandboxes are gone.
func (m *Manager) removePodCgroup(uid types.UID) {
	if m.opts.Cgroups == nil {
		return
	}
	if err := m.opts.Cgroups.RemovePod(uid); err != nil {
		m.opts.Log.Debug("remove pod cgroup", "uid", uid, "err", err)
	}
}

// setBurstableShares gives the burstable QoS cgroup the CPU requests of the node's
// running Burstable pods, as the kubelet's QoS manager does.
func (m *Manager) setBurstableShares() {
	if m.opts.Cgroups == nil {
		return
	}
	milli := int64(0)
	for _, p := range m.Pods() {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || cgroups.QOSDir(p) != "burstable" {
			continue
		}
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		milli += reqs.Cpu().MilliValue()
	}
	if err := m.opts.Cgroups.SetBurstable(milli); err != nil {
		m.opts.Log.Debug("burstable cgroup", "err", err)
	}
}

// teardownSandbox stops sb's containers with grace seconds, then the sandbox, and
// removes it.
func (m *Manager) teardownSandbox(ctx context.Context, id string, grace int64) {
	cs, _ := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id})
	var wg sync.WaitGroup
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = m.opts.Runtime.StopContainer(ctx, c.Id, grace)
			}()
		}
	}
	wg.Wait()
	_ = m.opts.Runtime.StopPodSandbox(ctx, id)
	_ = m.opts.Runtime.RemovePodSandbox(ctx, id)
}

// Container finds container of pod ns/name in the runtime: the newest, or the one before
// it when previous. It returns the container's id and log file.
func (m *Manager) Container(ctx context.Context, ns, pod, container string, previous bool) (id, logPath string, running bool, err error) {
	cs, err := m.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodNamespace: ns, labelPodName: pod, labelContainer: container}})
	if err != nil {
		return "", "", false, err
	}
	sort.Slice(cs, func(i, j int) bool {
		return cs[i].Metadata.Attempt > cs[j].Metadata.Attempt || cs[i].Metadata.Attempt == cs[j].Metadata.Attempt && cs[i].CreatedAt > cs[j].CreatedAt
	})
	i := 0
	if previous {
		i = 1
	}
	if len(cs) <= i {
		if previous {
			return "", "", false, fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
		}
		return "", "", false, fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod)
	}
	st, err := m.opts.Runtime.ContainerStatus(ctx, cs[i].Id, false)
	if err != nil {
		return "", "", false, err
	}
	return cs[i].Id, st.Status.LogPath, st.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
}
