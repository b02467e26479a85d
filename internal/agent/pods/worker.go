package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/utils/ptr"
)

// worker keeps one pod in the state its spec asks for.
type worker struct {
	m    *Manager
	uid  types.UID
	key  string
	wake chan struct{}

	restart map[string]*backoff // per container name
	pull    map[string]*backoff // per image
	waiting map[string]*corev1.ContainerStateWaiting

	volumes   map[string]string
	tokens    map[string]time.Time
	volumesAt time.Time

	last   *corev1.PodStatus
	lastRV int64

	// syncMu is held by each sync and by Manager.Kill; killed: Kill stopped the pod
	// (kill.go), nothing starts again.
	syncMu sync.Mutex
	killed bool

	// admitted: the pod passed Options.Admit (or already had a sandbox when first seen).
	admitted bool

	// settled: the last sync found nothing to do and nothing waiting on a clock (every
	// container running, no back-off, or the pod terminal), so the worker waits for a
	// poke (informer, relist, probes) or idleResync instead of polling every second.
	settled bool

	// trace times the pod's first start (trace.go).
	trace startTrace
}

func newWorker(m *Manager, pod *corev1.Pod) *worker {
	return &worker{m: m, uid: pod.UID, key: pod.Namespace + "/" + pod.Name, wake: make(chan struct{}, 1),
		restart: map[string]*backoff{}, pull: map[string]*backoff{}, waiting: map[string]*corev1.ContainerStateWaiting{}, tokens: map[string]time.Time{},
		trace: startTrace{seen: time.Now()}}
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run syncs until the pod is gone: on every change of the pod, its probes or its
// runtime state (the relist, pleg.go), every second while the pod is on its way (back-off,
// starting containers), and every idleResync once it is settled.
func (w *worker) run(ctx context.Context) {
	for {
		pod := w.m.pod(w.key, w.uid)
		if pod == nil {
			w.gone(ctx)
			return
		}
		err := w.syncSafely(ctx, pod)
		if err != nil && ctx.Err() == nil {
			w.m.opts.Log.Warn("pod sync", "pod", w.key, "err", err)
		}
		wait := time.Second
		if err == nil && w.settled {
			wait = idleResync
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// syncSafely is one sync; a panic in it is logged, not allowed to end the process (the
// agent may share it with the API server).
func (w *worker) syncSafely(ctx context.Context, pod *corev1.Pod) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in pod sync: %v\n%s", r, debug.Stack())
		}
	}()
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.settled = false
	mark(&w.trace.synced)
	if pod.DeletionTimestamp != nil {
		return w.terminate(ctx, pod)
	}
	if w.killed {
		return nil
	}
	return w.sync(ctx, pod)
}

// gone tears down what is left of a pod deleted from the API.
func (w *worker) gone(ctx context.Context) {
	sbs, _ := w.sandboxes(ctx)
	for _, sb := range sbs {
		w.m.teardownSandbox(ctx, sb.Id, 2)
	}
	w.m.removePodCgroup(w.uid)
	w.m.probes.forgetPod(w.uid)
	_ = os.RemoveAll(filepath.Join(w.m.opts.RootDir, "pods", string(w.uid)))
}

func (w *worker) sandboxes(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	sbs, err := w.m.opts.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: string(w.uid)}})
	if err != nil {
		return nil, err
	}
	sort.Slice(sbs, func(i, j int) bool {
		return sbs[i].Metadata.Attempt > sbs[j].Metadata.Attempt || sbs[i].Metadata.Attempt == sbs[j].Metadata.Attempt && sbs[i].CreatedAt > sbs[j].CreatedAt
	})
	return sbs, nil
}

// containers are the pod's runtime containers by name, newest first.
func (w *worker) containers(ctx context.Context) (map[string][]*runtimeapi.ContainerStatus, error) {
	cs, err := w.m.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodUID: string(w.uid)}})
	if err != nil {
		return nil, err
	}
	out := map[string][]*runtimeapi.ContainerStatus{}
	sort.Slice(cs, func(i, j int) bool {
		return cs[i].Metadata.Attempt > cs[j].Metadata.Attempt || cs[i].Metadata.Attempt == cs[j].Metadata.Attempt && cs[i].CreatedAt > cs[j].CreatedAt
	})
	for _, c := range cs {
		name := c.Labels[labelContainer]
		if len(out[name]) >= 2 {
			// Only the newest and the one before are kept (logs --previous).
			_ = w.m.opts.Runtime.RemoveContainer(ctx, c.Id)
			continue
		}
		st, err := w.m.opts.Runtime.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			return nil, fmt.Errorf("container status %s: %w", c.Id, err)
		}
		out[name] = append(out[name], st.Status)
	}
	return out, nil
}

// sync is one level-based pass over a live pod.
func (w *worker) sync(ctx context.Context, pod *corev1.Pod) error {
	m := w.m
	obs := observation{HostIP: m.opts.HostIP()}
	if p := w.oldStatus(pod).Phase; p == corev1.PodSucceeded || p == corev1.PodFailed {
		w.settled = true
		return nil // terminal: nothing runs again; the containers stay for their logs
	}
	sbs, err := w.sandboxes(ctx)
	if err != nil {
		return err
	}
	if !w.admitted && len(sbs) == 0 && m.opts.Admit != nil {
		if reason, msg, ok := m.opts.Admit(pod); !ok {
			return w.reject(ctx, pod, reason, msg)
		}
	}
	w.admitted = true
	var sandbox *runtimeapi.PodSandbox
	if len(sbs) > 0 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_READY {
		sandbox = sbs[0]
	}
	// Volumes: at first, then every minute or when a token is due.
	if w.volumes == nil || time.Since(w.volumesAt) > time.Minute || !tokensFresh(w.tokens, time.Now()) {
		vols, err := m.prepareVolumes(ctx, pod, w.tokens)
		if err != nil {
			var me mountError
			if errors.As(err, &me) {
				m.event(pod, "FailedMount", err.Error())
			}
			if w.volumes == nil {
				w.observeContainers(pod, &obs)
				return errors.Join(err, w.writeStatus(ctx, pod, obs))
			}
		} else {
			w.volumes, w.volumesAt = vols, time.Now()
		}
	}
	if sandbox == nil {
		attempt := uint32(0)
		if len(sbs) > 0 {
			attempt = sbs[0].Metadata.Attempt + 1
			for _, sb := range sbs {
				_ = m.opts.Runtime.StopPodSandbox(ctx, sb.Id)
			}
		}
		if err := w.writeStatus(ctx, pod, w.pendingObservation(pod, obs)); err != nil {
			return err
		}
		if err := os.MkdirAll(m.podLogDir(pod), 0o755); err != nil {
			return err
		}
		if m.opts.Cgroups != nil {
			if _, err := m.opts.Cgroups.EnsurePod(pod); err != nil {
				m.event(pod, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
				return fmt.Errorf("pod cgroup: %w", err)
			}
		}
		cfg := m.sandboxConfig(pod, attempt)
		mark(&w.trace.sandbox)
		id, err := m.opts.Runtime.RunPodSandbox(ctx, cfg, "")
		mark(&w.trace.sandboxDone)
		if err != nil {
			m.event(pod, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return fmt.Errorf("run sandbox: %w", err)
		}
		sbs, err = w.sandboxes(ctx)
		if err != nil {
			return err
		}
		for _, sb := range sbs {
			if sb.Id == id {
				sandbox = sb
			} else {
				_ = m.opts.Runtime.RemovePodSandbox(ctx, sb.Id)
			}
		}
		if sandbox == nil {
			return fmt.Errorf("sandbox %s vanished", id)
		}
	}
	obs.SandboxReady = true
	sbStatus, err := m.opts.Runtime.PodSandboxStatus(ctx, sandbox.Id, false)
	if err != nil {
		return err
	}
	if n := sbStatus.GetStatus().GetNetwork(); n != nil {
		obs.PodIP = n.Ip
	}
	if pod.Spec.HostNetwork {
		obs.PodIP = obs.HostIP
	}
	sbCfg := m.sandboxConfig(pod, sandbox.Metadata.Attempt)
	byName, err := w.containers(ctx)
	if err != nil {
		return err
	}
	// started: a regular container ran, so the pod is past its initialization (a sidecar
	// restarting does not hold the containers back). mainDone: every regular container
	// exited for good, so the pod has run to its end and its sidecars stop.
	started, mainDone := false, len(pod.Spec.Containers) > 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		rt := byName[c.Name]
		if len(rt) == 0 {
			mainDone = false
			continue
		}
		started = true
		if rt[0].State != runtimeapi.ContainerState_CONTAINER_EXITED || shouldRestart(pod, c, regularContainer, rt[0].ExitCode) {
			mainDone = false
		}
	}
	// Init containers in order: a regular one must complete, a sidecar (restartPolicy
	// Always) must have started (its startup probe passed) before the next one starts;
	// sidecars keep running, restarted when they exit, until the pod ends.
	initDone := true
	var sidecars []stopping
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		o := w.observe(ctx, pod, c, byName[c.Name], obs.PodIP)
		obs.Init = append(obs.Init, o)
		oi := &obs.Init[len(obs.Init)-1]
		l := o.Latest
		if isSidecar(c) {
			switch {
			case mainDone:
				delete(w.waiting, c.Name)
				oi.Waiting = nil
				if l != nil && l.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					sidecars = append(sidecars, stopping{spec: c, id: l.Id, sidecar: true})
				}
			case initDone || started:
				w.ensure(ctx, pod, c, l, sandbox.Id, sbCfg, obs.PodIP, sidecarContainer, oi)
			}
			if !started && (l == nil || l.State != runtimeapi.ContainerState_CONTAINER_RUNNING || !oi.Started) {
				initDone = false
			}
			continue
		}
		if !initDone || started {
			continue
		}
		switch {
		case l != nil && l.State == runtimeapi.ContainerState_CONTAINER_EXITED && l.ExitCode == 0:
			continue
		case l != nil && l.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		case l != nil && l.State == runtimeapi.ContainerState_CONTAINER_EXITED && !shouldRestart(pod, c, initContainer, l.ExitCode):
		default:
			w.ensure(ctx, pod, c, l, sandbox.Id, sbCfg, obs.PodIP, initContainer, oi)
		}
		initDone = false
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		o := w.observe(ctx, pod, c, byName[c.Name], obs.PodIP)
		if initDone || started {
			w.ensure(ctx, pod, c, o.Latest, sandbox.Id, sbCfg, obs.PodIP, regularContainer, &o)
		}
		obs.Containers = append(obs.Containers, o)
	}
	// Ephemeral containers start once, whatever the pod's initialization, and never again.
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		o := w.observe(ctx, pod, c, byName[c.Name], obs.PodIP)
		if l := o.Latest; l == nil || l.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			w.ensure(ctx, pod, c, l, sandbox.Id, sbCfg, obs.PodIP, ephemeralContainer, &o)
		}
		obs.Ephemeral = append(obs.Ephemeral, o)
	}
	if len(sidecars) > 0 {
		grace := max(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30), minimumGrace)
		w.stopContainers(ctx, pod, sidecars, obs.PodIP, grace)
		w.poke()
	}
	w.settled = len(sidecars) == 0 && settled(obs)
	return w.writeStatus(ctx, pod, obs)
}

// settled reports whether obs leaves nothing to do until something changes: no container
// waiting (a back-off or a start has a clock) and every container that will run again
// running. Pure.
func settled(obs observation) bool {
	for _, list := range [][]containerObs{obs.Init, obs.Containers, obs.Ephemeral} {
		for _, o := range list {
			if o.Waiting != nil || o.Latest == nil {
				return false
			}
			if o.Latest.State == runtimeapi.ContainerState_CONTAINER_CREATED || o.Latest.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
				return false
			}
		}
	}
	return true
}

// reject fails a pod the node did not admit, as the kubelet's rejectPod: a warning event
// and the terminal status, nothing run.
func (w *worker) reject(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	if w.m.recorder != nil {
		w.m.recorder.Event(pod, corev1.EventTypeWarning, reason, message)
	}
	p := pod.DeepCopy()
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message,
		QOSClass: qos.GetPodQOS(pod), StartTime: p.Status.StartTime}
	out, err := w.m.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("reject: %w", err)
	}
	w.last = &out.Status
	w.lastRV, _ = strconv.ParseInt(out.ResourceVersion, 10, 64)
	w.settled = true
	return nil
}

// containerKind is where a container is in the pod's spec; it decides its restarts.
type containerKind int

const (
	regularContainer containerKind = iota
	initContainer
	sidecarContainer
	ephemeralContainer
)

// isSidecar reports whether init container c is a sidecar (restartPolicy Always).
func isSidecar(c *corev1.Container) bool { return podutil.IsRestartableInitContainer(c) }

// shouldRestart is whether a container of kind that exited with code runs again: a
// sidecar always, an ephemeral container never, an init container after a failure when its
// policy says so, a regular container per its own restartPolicy (and rules) or the pod's.
// Pure.
func shouldRestart(pod *corev1.Pod, c *corev1.Container, kind containerKind, code int32) bool {
	switch kind {
	case sidecarContainer:
		return true
	case ephemeralContainer:
		return false
	case initContainer:
		return code != 0 && podutil.ContainerShouldRestart(*c, pod.Spec, code)
	}
	return podutil.ContainerShouldRestart(*c, pod.Spec, code)
}

// pendingObservation is the status before a sandbox exists.
func (w *worker) pendingObservation(pod *corev1.Pod, obs observation) observation {
	w.observeContainers(pod, &obs)
	return obs
}

// observeContainers fills obs with every container waiting (no sandbox yet).
func (w *worker) observeContainers(pod *corev1.Pod, obs *observation) {
	for i := range pod.Spec.InitContainers {
		obs.Init = append(obs.Init, containerObs{Spec: &pod.Spec.InitContainers[i], Waiting: w.waiting[pod.Spec.InitContainers[i].Name]})
	}
	for i := range pod.Spec.Containers {
		obs.Containers = append(obs.Containers, containerObs{Spec: &pod.Spec.Containers[i], Waiting: w.waiting[pod.Spec.Containers[i].Name]})
	}
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		obs.Ephemeral = append(obs.Ephemeral, containerObs{Spec: c, Waiting: w.waiting[c.Name]})
	}
}

// observe is what the runtime and the probes say of container c.
func (w *worker) observe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, rt []*runtimeapi.ContainerStatus, podIP string) containerObs {
	o := containerObs{Spec: c, Waiting: w.waiting[c.Name]}
	if len(rt) > 0 {
		o.Latest = rt[0]
	}
	if len(rt) > 1 {
		o.Previous = rt[1]
	}
	if l := o.Latest; l != nil && l.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		o.Waiting = nil
		o.Started, o.Ready, _ = w.m.probes.state(ctx, pod, c, l.Id, podIP, time.Unix(0, l.StartedAt), w.poke)
	}
	return o
}

// ensure moves container c (of kind) toward running: start it, restart it after an exit
// (with back-off) when its kind and policy say so, kill it when its liveness or startup
// probe failed. It records a waiting reason in o.
func (w *worker) ensure(ctx context.Context, pod *corev1.Pod, c *corev1.Container, l *runtimeapi.ContainerStatus, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, podIP string, kind containerKind, o *containerObs) {
	m := w.m
	now := time.Now()
	attempt := uint32(0)
	if l != nil {
		attempt = l.Metadata.Attempt + 1
		switch l.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			if started, _, liveFailed := m.probes.state(ctx, pod, c, l.Id, podIP, time.Unix(0, l.StartedAt), w.poke); liveFailed {
				probe, which := c.LivenessProbe, "liveness"
				if !started {
					probe, which = c.StartupProbe, "startup"
				}
				w.stopContainers(ctx, pod, []stopping{{spec: c, id: l.Id, message: fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, which)}}, podIP, killGrace(pod, probe))
				w.poke()
			}
			return
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			// Created but not started (the agent stopped in between): start it now, its
			// postStart hook included.
			if err := m.opts.Runtime.StartContainer(ctx, l.Id); err != nil {
				o.Waiting = &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
				w.waiting[c.Name] = o.Waiting
				return
			}
			m.event(pod, "Started", "Started container "+c.Name)
			if wt := w.postStart(ctx, pod, c, l.Id, podIP); wt != nil {
				o.Waiting = wt
				w.waiting[c.Name] = wt
				return
			}
			delete(w.waiting, c.Name)
			w.poke()
			return
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			if !shouldRestart(pod, c, kind, l.ExitCode) {
				// Done for good: it shows as terminated, not waiting.
				delete(w.waiting, c.Name)
				o.Waiting = nil
				return
			}
			finished := time.Unix(0, l.FinishedAt)
			b := w.restart[c.Name]
			if b.blocked(finished, now) {
				o.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", b.delay, c.Name, pod.Name, pod.Namespace, pod.UID)}
				if prev := w.waiting[c.Name]; prev == nil || prev.Reason != "CrashLoopBackOff" {
					m.event(pod, "BackOff", "Back-off restarting failed container "+c.Name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
				}
				w.waiting[c.Name] = o.Waiting
				return
			}
			if b != nil && b.since.After(finished) {
				// This exit was already counted: wait for the new container.
				return
			}
			w.restart[c.Name] = b.next(now, finished.Sub(time.Unix(0, l.StartedAt)))
		default:
			_ = m.opts.Runtime.RemoveContainer(ctx, l.Id)
			attempt = l.Metadata.Attempt
		}
	}
	id, wt := w.start(ctx, pod, c, attempt, sandboxID, sbCfg, podIP, kind)
	if wt != nil {
		o.Waiting = wt
		w.waiting[c.Name] = wt
		return
	}
	delete(w.waiting, c.Name)
	o.Waiting = nil
	// Observe the new container now, so that this pass writes it running (and ready,
	// without a readiness probe) rather than ContainerCreating followed by another pass
	// and another status write. A container that is not running yet gets the next pass.
	st, err := m.opts.Runtime.ContainerStatus(ctx, id, false)
	if err != nil || st.GetStatus() == nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		w.poke()
		return
	}
	o.Latest, o.Previous = st.Status, l
	o.Started, o.Ready, _ = m.probes.state(ctx, pod, c, id, podIP, time.Unix(0, st.Status.StartedAt), w.poke)
}

// killGrace is the grace period of a container killed for its failed probe: the probe's
// own terminationGracePeriodSeconds when set, else the pod's.
func killGrace(pod *corev1.Pod, probe *corev1.Probe) int64 {
	if probe != nil && probe.TerminationGracePeriodSeconds != nil {
		return *probe.TerminationGracePeriodSeconds
	}
	return ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)
}

// start pulls c's image when needed, creates and starts the container, and runs its
// postStart hook (a failing hook kills it). It returns the container's id, or why it is
// still waiting.
func (w *worker) start(ctx context.Context, pod *corev1.Pod, c *corev1.Container, attempt uint32, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, podIP string, kind containerKind) (string, *corev1.ContainerStateWaiting) {
	m := w.m
	image, wt := w.ensureImage(ctx, pod, c, sbCfg)
	if wt != nil {
		return "", wt
	}
	env, err := m.envVars(ctx, pod, c, podIP, m.opts.HostIP())
	if err != nil {
		m.event(pod, "Failed", "Error: "+err.Error())
		return "", &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
	}
	cfg, err := m.containerConfig(pod, c, attempt, image, env, w.volumes, kind == initContainer || kind == sidecarContainer)
	if err != nil {
		return "", &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
	}
	if kind == ephemeralContainer {
		if err := w.targetNamespace(ctx, pod, c.Name, cfg); err != nil {
			return "", &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
		}
	}
	mark(&w.trace.create)
	id, err := m.opts.Runtime.CreateContainer(ctx, sandboxID, cfg, sbCfg)
	mark(&w.trace.createDone)
	if err != nil {
		m.event(pod, "Failed", "Error: "+err.Error())
		return "", &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}
	}
	m.event(pod, "Created", "Created container: "+c.Name)
	if err := m.opts.Runtime.StartContainer(ctx, id); err != nil {
		m.event(pod, "Failed", "Error: "+err.Error())
		return "", &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
	}
	mark(&w.trace.startDone)
	m.event(pod, "Started", "Started container "+c.Name)
	return id, w.postStart(ctx, pod, c, id, podIP)
}

// postStart runs c's postStart hook, if any, on its just-started container id; a failing
// hook kills the container and the result says why it waits.
func (w *worker) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string) *corev1.ContainerStateWaiting {
	m := w.m
	h := c.Lifecycle
	if h == nil || h.PostStart == nil {
		return nil
	}
	if err := m.runHook(ctx, pod, c, id, podIP, h.PostStart); err != nil {
		m.opts.Log.Info("postStart hook failed", "pod", w.key, "container", c.Name, "err", err)
		m.event(pod, "FailedPostStartHook", "PostStartHook failed: "+err.Error())
		w.stopContainers(ctx, pod, []stopping{{spec: c, id: id, message: "FailedPostStartHook"}}, podIP, ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30))
		return &corev1.ContainerStateWaiting{Reason: "PostStartHookError", Message: err.Error()}
	}
	return nil
}

// targetNamespace makes ephemeral container name share the process namespace of its
// targetContainerName, which must be running (the pod's own namespace when the pod
// shares one already).
func (w *worker) targetNamespace(ctx context.Context, pod *corev1.Pod, name string, cfg *runtimeapi.ContainerConfig) error {
	var target string
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			target = ec.TargetContainerName
		}
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if target == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return nil
	}
	cs, err := w.m.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID), labelContainer: target}})
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return fmt.Errorf("target container %q of ephemeral container %q is not running", target, name)
	}
	ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, cs[0].Id
	return nil
}

// ensureImage makes c's image present per its imagePullPolicy and returns its reference.
func (w *worker) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sbCfg *runtimeapi.PodSandboxConfig) (string, *corev1.ContainerStateWaiting) {
	m := w.m
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	present := false
	if st, err := m.opts.Images.ImageStatus(ctx, spec, false); err == nil && st.GetImage() != nil {
		present = true
	}
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	if present && policy != corev1.PullAlways {
		return c.Image, nil
	}
	if policy == corev1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		m.event(pod, "ErrImageNeverPull", msg)
		return "", &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: msg}
	}
	b := w.pull[c.Image]
	now := time.Now()
	if b != nil && b.blocked(b.since, now) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		if prev := w.waiting[c.Name]; prev == nil || prev.Reason != "ImagePullBackOff" {
			m.event(pod, "BackOff", msg)
		}
		return "", &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}
	}
	m.event(pod, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	t0 := time.Now()
	ref, err := m.opts.Images.PullImage(ctx, spec, nil, sbCfg)
	if err != nil {
		w.pull[c.Image] = b.next(now, 0)
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		m.event(pod, "Failed", msg)
		return "", &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}
	}
	delete(w.pull, c.Image)
	m.event(pod, "Pulled", fmt.Sprintf("Successfully pulled image %q in %s", c.Image, time.Since(t0).Round(time.Millisecond)))
	return ref, nil
}

// oldStatus is the status the next one is computed from: the one this worker last wrote
// when the informer has not caught up with it yet.
func (w *worker) oldStatus(pod *corev1.Pod) corev1.PodStatus {
	rv, _ := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	if w.last != nil && rv < w.lastRV {
		return *w.last
	}
	return pod.Status
}

// writeStatus computes the pod's status from obs and writes it when it changed.
func (w *worker) writeStatus(ctx context.Context, pod *corev1.Pod, obs observation) error {
	p := pod.DeepCopy()
	p.Status = w.oldStatus(pod)
	st := generateStatus(p, obs, time.Now())
	if statusEqual(p.Status, st) {
		return nil
	}
	p.Status = st
	out, err := w.m.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			w.poke()
			return nil
		}
		return fmt.Errorf("update status: %w", err)
	}
	w.last = &out.Status
	w.lastRV, _ = strconv.ParseInt(out.ResourceVersion, 10, 64)
	w.trace.written(w.m.opts.Log, w.key, &out.Status)
	return nil
}

// terminate stops a pod being deleted: preStop hooks and the stop signal within the grace
// period, SIGKILL at its end (CRI StopContainer), the sandbox removed, the final status
// written and the pod deleted with grace 0 and its UID as precondition.
func (w *worker) terminate(ctx context.Context, pod *corev1.Pod) error {
	m := w.m
	grace := ptr.Deref(pod.DeletionGracePeriodSeconds, ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30))
	grace = max(grace, 2)
	if err := w.stopAll(ctx, pod, grace); err != nil {
		return err
	}
	m.probes.forgetPod(w.uid)
	// The final status: every container terminated.
	byName, err := w.containers(ctx)
	if err != nil {
		return err
	}
	obs := observation{HostIP: m.opts.HostIP()}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		obs.Init = append(obs.Init, terminatedObs(c, byName[c.Name]))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		obs.Containers = append(obs.Containers, terminatedObs(c, byName[c.Name]))
	}
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		obs.Ephemeral = append(obs.Ephemeral, terminatedObs(c, byName[c.Name]))
	}
	sbs, _ := w.sandboxes(ctx)
	for _, sb := range sbs {
		m.teardownSandbox(ctx, sb.Id, 1)
	}
	m.removePodCgroup(pod.UID)
	if err := w.writeFinalStatus(ctx, pod, obs); err != nil {
		return err
	}
	_ = os.RemoveAll(filepath.Join(m.opts.RootDir, "pods", string(pod.UID)))
	_ = os.RemoveAll(m.podLogDir(pod))
	err = m.opts.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("final delete: %w", err)
	}
	return nil
}

// stopAll stops every running container of pod within grace seconds in the kubelet's
// order (stopContainers: preStop hooks, regular and ephemeral containers, then sidecars
// in reverse).
func (w *worker) stopAll(ctx context.Context, pod *corev1.Pod, grace int64) error {
	byName, err := w.containers(ctx)
	if err != nil {
		return err
	}
	var list []stopping
	add := func(c *corev1.Container, sidecar bool) {
		if l := byName[c.Name]; len(l) > 0 && l[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			list = append(list, stopping{spec: c, id: l[0].Id, sidecar: sidecar})
		}
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i], isSidecar(&pod.Spec.InitContainers[i]))
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], false)
	}
	for i := range pod.Spec.EphemeralContainers {
		add((*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), false)
	}
	podIP := ""
	if sbs, _ := w.sandboxes(ctx); len(sbs) > 0 {
		podIP = w.m.podIP(ctx, pod, sbs[0].Id)
	}
	w.stopContainers(ctx, pod, list, podIP, grace)
	return nil
}

func terminatedObs(c *corev1.Container, rt []*runtimeapi.ContainerStatus) containerObs {
	o := containerObs{Spec: c}
	if len(rt) > 0 {
		o.Latest = rt[0]
	}
	if len(rt) > 1 {
		o.Previous = rt[1]
	}
	if o.Latest == nil {
		o.Waiting = &corev1.ContainerStateWaiting{Reason: reasonContainerCreating}
	}
	return o
}

// writeFinalStatus is the status of a terminated pod: Succeeded when every container
// exited 0, Failed otherwise, whatever the restart policy.
func (w *worker) writeFinalStatus(ctx context.Context, pod *corev1.Pod, obs observation) error {
	p := pod.DeepCopy()
	p.Status = w.oldStatus(pod)
	st := generateStatus(p, obs, time.Now())
	st.Phase = corev1.PodSucceeded
	for _, cs := range st.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			st.Phase = corev1.PodFailed
		}
	}
	for i := range st.Conditions {
		switch st.Conditions[i].Type {
		case corev1.PodReady, corev1.ContainersReady, corev1.PodReadyToStartContainers:
			if st.Conditions[i].Status == corev1.ConditionTrue {
				st.Conditions[i].Status, st.Conditions[i].Reason = corev1.ConditionFalse, "PodCompleted"
				st.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
	}
	p.Status = st
	_, err := w.m.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("final status: %w", err)
	}
	return nil
}

// preStop runs c's preStop hook within grace seconds, its failure an event.
func (w *worker) preStop(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, grace int64) {
	podIP := ""
	if sbs, _ := w.sandboxes(ctx); len(sbs) > 0 {
		podIP = w.m.podIP(ctx, pod, sbs[0].Id)
	}
	hctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	if err := w.m.runHook(hctx, pod, c, id, podIP, c.Lifecycle.PreStop); err != nil {
		w.m.event(pod, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %v", err))
	}
}
