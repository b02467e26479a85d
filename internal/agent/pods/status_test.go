package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func pod(policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{Name: "a", Image: "img"}}}}
}

func exited(code int32, attempt uint32) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: "x", Metadata: &runtimeapi.ContainerMetadata{Name: "a", Attempt: attempt},
		State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: code, StartedAt: 1e9, FinishedAt: 2e9}
}

func running(attempt uint32) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: "r", Metadata: &runtimeapi.ContainerMetadata{Name: "a", Attempt: attempt},
		State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: 1e9}
}

func condition(st corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestGenerateStatus(t *testing.T) {
	now := time.Unix(100, 0)
	crash := &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		obs     containerObs
		sandbox bool
		phase   corev1.PodPhase
		waiting string
		ready   corev1.ConditionStatus
		last    bool
	}{
		{"no sandbox yet", pod(corev1.RestartPolicyAlways), containerObs{}, false, corev1.PodPending, "ContainerCreating", corev1.ConditionFalse, false},
		{"image pull failed", pod(corev1.RestartPolicyAlways), containerObs{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}, true, corev1.PodPending, "ErrImagePull", corev1.ConditionFalse, false},
		{"running and ready", pod(corev1.RestartPolicyAlways), containerObs{Latest: running(0), Ready: true, Started: true}, true, corev1.PodRunning, "", corev1.ConditionTrue, false},
		{"running not ready", pod(corev1.RestartPolicyAlways), containerObs{Latest: running(0), Started: true}, true, corev1.PodRunning, "", corev1.ConditionFalse, false},
		{"crash loop", pod(corev1.RestartPolicyAlways), containerObs{Latest: exited(3, 2), Waiting: crash}, true, corev1.PodRunning, "CrashLoopBackOff", corev1.ConditionFalse, true},
		{"restarted keeps previous exit", pod(corev1.RestartPolicyAlways), containerObs{Latest: running(1), Previous: exited(1, 0), Ready: true, Started: true}, true, corev1.PodRunning, "", corev1.ConditionTrue, true},
		{"never: failed", pod(corev1.RestartPolicyNever), containerObs{Latest: exited(1, 0)}, true, corev1.PodFailed, "", corev1.ConditionFalse, false},
		{"never: succeeded", pod(corev1.RestartPolicyNever), containerObs{Latest: exited(0, 0)}, true, corev1.PodSucceeded, "", corev1.ConditionFalse, false},
		{"on failure: succeeded", pod(corev1.RestartPolicyOnFailure), containerObs{Latest: exited(0, 0)}, true, corev1.PodSucceeded, "", corev1.ConditionFalse, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.Spec = &tc.pod.Spec.Containers[0]
			st := generateStatus(tc.pod, observation{SandboxReady: tc.sandbox, PodIP: "10.0.0.2", Containers: []containerObs{tc.obs}}, now)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			cs := st.ContainerStatuses[0]
			got := ""
			if cs.State.Waiting != nil {
				got = cs.State.Waiting.Reason
			}
			if got != tc.waiting {
				t.Errorf("waiting %q, want %q", got, tc.waiting)
			}
			if c := condition(st, corev1.PodReady); c.Status != tc.ready {
				t.Errorf("Ready %s, want %s", c.Status, tc.ready)
			}
			if (cs.LastTerminationState.Terminated != nil) != tc.last {
				t.Errorf("lastState %+v, want terminated: %v", cs.LastTerminationState, tc.last)
			}
			want := []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady}
			for i, c := range st.Conditions {
				if i >= len(want) || c.Type != want[i] {
					t.Fatalf("conditions %v, want order %v", st.Conditions, want)
				}
			}
			if c := condition(st, corev1.PodReadyToStartContainers); (c.Status == corev1.ConditionTrue) != (tc.sandbox && tc.phase != corev1.PodFailed && tc.phase != corev1.PodSucceeded) {
				t.Errorf("PodReadyToStartContainers %s", c.Status)
			}
		})
	}
}

func TestGenerateStatusKeepsTransitionTimes(t *testing.T) {
	p := pod(corev1.RestartPolicyAlways)
	obs := observation{SandboxReady: true, Containers: []containerObs{{Spec: &p.Spec.Containers[0], Latest: running(0), Ready: true, Started: true}}}
	first := generateStatus(p, obs, time.Unix(100, 0))
	p.Status = first
	second := generateStatus(p, obs, time.Unix(200, 0))
	if !statusEqual(first, second) {
		t.Errorf("an unchanged pod's status changed:\n%+v\n%+v", first, second)
	}
}

func TestInitContainersPending(t *testing.T) {
	p := pod(corev1.RestartPolicyAlways)
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img"}}
	st := generateStatus(p, observation{SandboxReady: true,
		Init:       []containerObs{{Spec: &p.Spec.InitContainers[0], Latest: running(0)}},
		Containers: []containerObs{{Spec: &p.Spec.Containers[0]}}}, time.Unix(1, 0))
	if st.Phase != corev1.PodPending || condition(st, corev1.PodInitialized).Reason != "ContainersNotInitialized" {
		t.Errorf("phase %s, Initialized %+v", st.Phase, condition(st, corev1.PodInitialized))
	}
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
		t.Errorf("container waiting %+v, want PodInitializing", w)
	}
}

func TestBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	var b *backoff
	if b.blocked(now, now) {
		t.Error("no back-off yet, but blocked")
	}
	b = b.next(now, time.Second)
	if b.delay != 10*time.Second || !b.blocked(now, now.Add(5*time.Second)) || b.blocked(now, now.Add(10*time.Second)) {
		t.Errorf("first back-off %v", b.delay)
	}
	for range 10 {
		b = b.next(now, time.Second)
	}
	if b.delay != 300*time.Second {
		t.Errorf("capped back-off %v, want 5m", b.delay)
	}
	if b = b.next(now, 11*time.Minute); b.delay != 10*time.Second {
		t.Errorf("after 11 min running, back-off %v, want 10s", b.delay)
	}
}

func TestResources(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name                  string
		req, lim              corev1.ResourceList
		shares, quota, memory int64
	}{
		{"best effort", nil, nil, 2, 0, 0},
		{"request 250m", corev1.ResourceList{corev1.ResourceCPU: q("250m")}, nil, 256, 0, 0},
		{"limit only", nil, corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("64Mi")}, 512, 50000, 64 << 20},
		{"tiny limit", nil, corev1.ResourceList{corev1.ResourceCPU: q("1m")}, 2, 1000, 0},
	} {
		r := Resources(&corev1.Container{Resources: corev1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}})
		if r.CpuShares != tc.shares || r.CpuQuota != tc.quota || r.MemoryLimitInBytes != tc.memory {
			t.Errorf("%s: shares %d quota %d memory %d, want %d %d %d", tc.name, r.CpuShares, r.CpuQuota, r.MemoryLimitInBytes, tc.shares, tc.quota, tc.memory)
		}
	}
}

func TestParseResolvConf(t *testing.T) {
	s, search, opts := ParseResolvConf("# c\nnameserver 127.0.0.1\nnameserver 10.0.0.10\nsearch a b\noptions ndots:2 edns0\n")
	if len(s) != 2 || len(search) != 2 || len(opts) != 2 || s[1] != "10.0.0.10" {
		t.Errorf("%v %v %v", s, search, opts)
	}
}

func TestExpandArgs(t *testing.T) {
	got := expandArgs([]string{"echo", "$(A)-$(B)", "$$(A)"}, [][2]string{{"A", "x"}, {"B", "y"}})
	if got[1] != "x-y" || got[2] != "$(A)" {
		t.Errorf("%q", got)
	}
}

func startedRunning(attempt uint32, started bool) containerObs {
	return containerObs{Latest: running(attempt), Started: started, Ready: started}
}

// TestSidecarStatus: sidecars (restartable init containers) in the kubelet's status: they
// must have started for Initialized, count for ContainersReady, keep a started pod Running
// while they restart, and count for nothing in the phase once they exited.
func TestSidecarStatus(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	crash := &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	for _, tc := range []struct {
		name        string
		policy      corev1.RestartPolicy
		sidecar     containerObs
		main        containerObs
		phase       corev1.PodPhase
		initialized corev1.ConditionStatus
		ready       corev1.ConditionStatus
		mainWaiting string
	}{
		{"sidecar not started yet", corev1.RestartPolicyAlways, startedRunning(0, false), containerObs{}, corev1.PodPending, corev1.ConditionFalse, corev1.ConditionFalse, "PodInitializing"},
		{"sidecar started", corev1.RestartPolicyAlways, startedRunning(0, true), containerObs{}, corev1.PodPending, corev1.ConditionTrue, corev1.ConditionFalse, "ContainerCreating"},
		{"both running", corev1.RestartPolicyAlways, startedRunning(0, true), startedRunning(0, true), corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionTrue, ""},
		{"sidecar unready", corev1.RestartPolicyAlways, containerObs{Latest: running(0), Started: true}, startedRunning(0, true), corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionFalse, ""},
		{"sidecar restarting after init", corev1.RestartPolicyAlways, containerObs{Latest: exited(1, 1), Waiting: crash}, startedRunning(0, true), corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionFalse, ""},
		{"job done, sidecar running", corev1.RestartPolicyNever, startedRunning(0, true), containerObs{Latest: exited(0, 0)}, corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionFalse, ""},
		{"job done, sidecar stopped", corev1.RestartPolicyNever, containerObs{Latest: exited(143, 0)}, containerObs{Latest: exited(0, 0)}, corev1.PodSucceeded, corev1.ConditionTrue, corev1.ConditionFalse, ""},
		{"job failed, sidecar stopped", corev1.RestartPolicyOnFailure, containerObs{Latest: exited(143, 0)}, containerObs{Latest: exited(1, 0)}, corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionFalse, ""},
		{"never: job failed, sidecar stopped", corev1.RestartPolicyNever, containerObs{Latest: exited(143, 0)}, containerObs{Latest: exited(1, 0)}, corev1.PodFailed, corev1.ConditionTrue, corev1.ConditionFalse, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.policy)
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "img"}, {Name: "proxy", Image: "img", RestartPolicy: &always}}
			setup := containerObs{Spec: &p.Spec.InitContainers[0], Latest: exited(0, 0)}
			tc.sidecar.Spec, tc.main.Spec = &p.Spec.InitContainers[1], &p.Spec.Containers[0]
			st := generateStatus(p, observation{SandboxReady: true, Init: []containerObs{setup, tc.sidecar}, Containers: []containerObs{tc.main}}, time.Unix(1, 0))
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			if c := condition(st, corev1.PodInitialized); c.Status != tc.initialized {
				t.Errorf("Initialized %+v, want %s", c, tc.initialized)
			}
			if c := condition(st, corev1.ContainersReady); c.Status != tc.ready {
				t.Errorf("ContainersReady %+v, want %s", c, tc.ready)
			}
			got := ""
			if w := st.ContainerStatuses[0].State.Waiting; w != nil {
				got = w.Reason
			}
			if got != tc.mainWaiting {
				t.Errorf("main container waiting %q, want %q", got, tc.mainWaiting)
			}
			if !st.InitContainerStatuses[0].Ready {
				t.Errorf("a completed init container is ready in the kubelet's status: %+v", st.InitContainerStatuses[0])
			}
		})
	}
}

// TestEphemeralStatus: an ephemeral container has its status entry, never ready, and
// takes no part in the pod's phase or readiness.
func TestEphemeralStatus(t *testing.T) {
	p := pod(corev1.RestartPolicyAlways)
	debug := &corev1.Container{Name: "debugger", Image: "img"}
	for _, e := range []containerObs{{Spec: debug}, {Spec: debug, Latest: running(0), Started: true, Ready: true}, {Spec: debug, Latest: exited(2, 0)}} {
		st := generateStatus(p, observation{SandboxReady: true, Containers: []containerObs{{Spec: &p.Spec.Containers[0], Latest: running(0), Started: true, Ready: true}}, Ephemeral: []containerObs{e}}, time.Unix(1, 0))
		if st.Phase != corev1.PodRunning || condition(st, corev1.PodReady).Status != corev1.ConditionTrue {
			t.Errorf("ephemeral %+v: phase %s, Ready %s", e.Latest, st.Phase, condition(st, corev1.PodReady).Status)
		}
		if len(st.EphemeralContainerStatuses) != 1 || st.EphemeralContainerStatuses[0].Ready || st.EphemeralContainerStatuses[0].Started != nil {
			t.Errorf("ephemeral statuses %+v", st.EphemeralContainerStatuses)
		}
	}
}

func TestShouldRestart(t *testing.T) {
	always, onFailure, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever
	for _, tc := range []struct {
		name   string
		pod    corev1.RestartPolicy
		own    *corev1.ContainerRestartPolicy
		kind   containerKind
		code   int32
		expect bool
	}{
		{"always, exit 0", corev1.RestartPolicyAlways, nil, regularContainer, 0, true},
		{"on failure, exit 0", corev1.RestartPolicyOnFailure, nil, regularContainer, 0, false},
		{"on failure, exit 1", corev1.RestartPolicyOnFailure, nil, regularContainer, 1, true},
		{"never, exit 1", corev1.RestartPolicyNever, nil, regularContainer, 1, false},
		{"never pod, container always", corev1.RestartPolicyNever, &always, regularContainer, 0, true},
		{"always pod, container never", corev1.RestartPolicyAlways, &never, regularContainer, 1, false},
		{"never pod, container on failure", corev1.RestartPolicyNever, &onFailure, regularContainer, 2, true},
		{"init, always pod, exit 0", corev1.RestartPolicyAlways, nil, initContainer, 0, false},
		{"init, always pod, exit 1", corev1.RestartPolicyAlways, nil, initContainer, 1, true},
		{"init, never pod, exit 1", corev1.RestartPolicyNever, nil, initContainer, 1, false},
		{"sidecar, never pod, exit 0", corev1.RestartPolicyNever, &always, sidecarContainer, 0, true},
		{"ephemeral, always pod", corev1.RestartPolicyAlways, nil, ephemeralContainer, 1, false},
	} {
		p := pod(tc.pod)
		c := &corev1.Container{Name: "c", RestartPolicy: tc.own}
		if got := shouldRestart(p, c, tc.kind, tc.code); got != tc.expect {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.expect)
		}
	}
}
