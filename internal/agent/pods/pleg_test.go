package pods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestFingerprints(t *testing.T) {
	sb := func(id, uid string, st runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{Id: id, State: st, Labels: map[string]string{labelPodUID: uid}}
	}
	c := func(id, uid string, st runtimeapi.ContainerState) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, State: st, Labels: map[string]string{labelPodUID: uid}}
	}
	ready, running, exited := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	base := fingerprints([]*runtimeapi.PodSandbox{sb("s1", "a", ready), sb("s2", "b", ready)},
		[]*runtimeapi.Container{c("c1", "a", running), c("c2", "b", running)})
	for _, tc := range []struct {
		name    string
		sbs     []*runtimeapi.PodSandbox
		cs      []*runtimeapi.Container
		changed map[string]bool
	}{
		{"same, other order", []*runtimeapi.PodSandbox{sb("s2", "b", ready), sb("s1", "a", ready)},
			[]*runtimeapi.Container{c("c2", "b", running), c("c1", "a", running)}, map[string]bool{}},
		{"a's container exited", []*runtimeapi.PodSandbox{sb("s1", "a", ready), sb("s2", "b", ready)},
			[]*runtimeapi.Container{c("c1", "a", exited), c("c2", "b", running)}, map[string]bool{"a": true}},
		{"b's container replaced", []*runtimeapi.PodSandbox{sb("s1", "a", ready), sb("s2", "b", ready)},
			[]*runtimeapi.Container{c("c1", "a", running), c("c3", "b", running)}, map[string]bool{"b": true}},
		{"a's sandbox not ready", []*runtimeapi.PodSandbox{sb("s1", "a", runtimeapi.PodSandboxState_SANDBOX_NOTREADY), sb("s2", "b", ready)},
			[]*runtimeapi.Container{c("c1", "a", running), c("c2", "b", running)}, map[string]bool{"a": true}},
	} {
		got := fingerprints(tc.sbs, tc.cs)
		for _, uid := range []string{"a", "b"} {
			if ch := got[typesUID(uid)] != base[typesUID(uid)]; ch != tc.changed[uid] {
				t.Errorf("%s: pod %s changed = %v, want %v", tc.name, uid, ch, tc.changed[uid])
			}
		}
	}
}

func TestSettled(t *testing.T) {
	st := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{State: s}
	}
	running, exited, created := st(runtimeapi.ContainerState_CONTAINER_RUNNING), st(runtimeapi.ContainerState_CONTAINER_EXITED), st(runtimeapi.ContainerState_CONTAINER_CREATED)
	for _, tc := range []struct {
		name string
		obs  observation
		want bool
	}{
		{"all running", observation{Containers: []containerObs{{Latest: running}, {Latest: running}}}, true},
		{"init done, main running", observation{Init: []containerObs{{Latest: exited}}, Containers: []containerObs{{Latest: running}}}, true},
		{"not started yet", observation{Containers: []containerObs{{}}}, false},
		{"created, not started", observation{Containers: []containerObs{{Latest: created}}}, false},
		{"back-off", observation{Containers: []containerObs{{Latest: exited, Waiting: &waitingCrashLoop}}}, false},
		{"init container still to run", observation{Init: []containerObs{{Latest: exited}, {}}, Containers: []containerObs{{}}}, false},
	} {
		if got := settled(tc.obs); got != tc.want {
			t.Errorf("%s: settled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

var waitingCrashLoop = corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}

func typesUID(s string) types.UID { return types.UID(s) }
