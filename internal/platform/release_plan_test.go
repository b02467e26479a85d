package platform

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func TestMergeRevisionIdempotent(t *testing.T) {
	base := revisionSpec{Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}}
	rel := []corev1.EnvVar{{Name: "B", Value: "3"}, {Name: "C", Value: "4"}}
	once := mergeRevision(base, "web:2", rel)
	twice := mergeRevision(once, "web:2", rel)
	if revisionHash(once) != revisionHash(twice) {
		t.Fatalf("merge not idempotent: %+v vs %+v", once, twice)
	}
	if once.Image != "web:2" || len(once.Env) != 3 || once.Env[1].Value != "3" || once.Env[2].Name != "C" {
		t.Fatalf("merge = %+v", once)
	}
	if got := mergeRevision(base, "", nil); revisionHash(got) != revisionHash(base) {
		t.Fatalf("empty release changes the spec: %+v", got)
	}
	if revisionHash(base) == revisionHash(once) {
		t.Fatal("different revisions hash alike")
	}
}

func TestCanaryReplicas(t *testing.T) {
	for _, c := range []struct {
		w, r   int32
		routed bool
		want   int32
	}{{20, 5, false, 1}, {20, 10, false, 2}, {50, 3, false, 2}, {0, 4, false, 0}, {0, 4, true, 1}, {100, 4, false, 4}, {10, 1, true, 1}} {
		if got := canaryReplicas(c.w, c.r, c.routed); got != c.want {
			t.Errorf("canaryReplicas(%d, %d, %v) = %d, want %d", c.w, c.r, c.routed, got, c.want)
		}
	}
}

func TestPlanRelease(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := func(v int32) v1alpha1.ReleaseStep { return v1alpha1.ReleaseStep{SetWeight: &v} }
	pause := v1alpha1.ReleaseStep{Pause: &v1alpha1.ReleasePause{}}
	timed := v1alpha1.ReleaseStep{Pause: &v1alpha1.ReleasePause{Duration: &metav1.Duration{Duration: time.Minute}}}
	step := func(i int32) *int32 { return &i }
	started := metav1.NewTime(now.Add(-30 * time.Second))
	inflight := func(phase string, cur *int32) v1alpha1.ReleaseStatus {
		return v1alpha1.ReleaseStatus{ReleasePhase: phase, CurrentStep: cur, StableRevision: "s", CanaryRevision: "t",
			History: []v1alpha1.ReleaseRevision{{Revision: "t", Image: "web:2", Started: started}}}
	}
	base := releaseObs{Now: now, TargetRev: "t", CurRev: "s", Image: "web:2", Deadline: time.Minute, Replicas: 5}
	canary := base
	canary.Strategy, canary.Steps = v1alpha1.ReleaseCanary, []v1alpha1.ReleaseStep{w(20), pause}
	with := func(o releaseObs, f func(*releaseObs)) releaseObs { f(&o); return o }

	cases := []struct {
		name  string
		obs   releaseObs
		check func(t *testing.T, p releasePlan)
	}{
		{"nothing to ship", with(base, func(o *releaseObs) { o.TargetRev = "s" }), func(t *testing.T, p releasePlan) {
			expect(t, p.Status.ReleasePhase == v1alpha1.ReleaseSucceeded && !p.PatchComponent && !p.Waiting && p.Status.StableRevision == "s", "idle: %+v", p)
		}},
		{"rolling starts", base, func(t *testing.T, p releasePlan) {
			expect(t, p.PatchComponent && p.Strategy == "RollingUpdate" && p.Waiting, "patch: %+v", p)
			expect(t, p.Status.ReleasePhase == v1alpha1.ReleaseProgressing && len(p.Status.History) == 1 && p.Status.History[0].Revision == "t", "status: %+v", p.Status)
			expect(t, p.Status.StableRevision == "s" && p.Status.CanaryRevision == "t", "revisions: %+v", p.Status)
			expect(t, hasEvent(p, "RevisionStarted"), "events %+v", p.Events)
		}},
		{"recreate starts", with(base, func(o *releaseObs) { o.Strategy = v1alpha1.ReleaseRecreate }), func(t *testing.T, p releasePlan) {
			expect(t, p.PatchComponent && p.Strategy == "Recreate", "%+v", p)
		}},
		{"rolling waits", with(base, func(o *releaseObs) { o.CurRev, o.Status = "t", inflight(v1alpha1.ReleaseProgressing, nil) }), func(t *testing.T, p releasePlan) {
			expect(t, !p.PatchComponent && p.Waiting && p.RequeueAfter > 0, "%+v", p)
		}},
		{"rolling done", with(base, func(o *releaseObs) {
			o.CurRev, o.Status, o.Stable.Rolled = "t", inflight(v1alpha1.ReleaseProgressing, nil), true
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.Status.ReleasePhase == v1alpha1.ReleaseSucceeded && p.Status.History[0].Outcome == v1alpha1.ReleaseSucceeded && p.Status.StableRevision == "t" && !p.Waiting, "%+v", p.Status)
		}},
		{"rolling past its deadline rolls back", with(base, func(o *releaseObs) {
			o.CurRev, o.Status, o.Now, o.PodReason = "t", inflight(v1alpha1.ReleaseProgressing, nil), now.Add(time.Minute), "pod web-1: ImagePullBackOff: no such image"
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.RevertComponent && !p.PatchComponent && p.Status.ReleasePhase == v1alpha1.ReleaseRolledBack, "%+v", p)
			expect(t, strings.Contains(p.Status.History[0].Message, "ImagePullBackOff"), "message %q", p.Status.History[0].Message)
			expect(t, p.Events[len(p.Events)-1].Warn, "warning event: %+v", p.Events)
		}},
		{"rolled back stays rolled back", with(base, func(o *releaseObs) {
			st := inflight(v1alpha1.ReleaseRolledBack, nil)
			st.History[0].Outcome = v1alpha1.ReleaseRolledBack
			o.Status = st
		}), func(t *testing.T, p releasePlan) {
			expect(t, !p.PatchComponent && !p.Canary && p.Status.ReleasePhase == v1alpha1.ReleaseRolledBack && len(p.Status.History) == 1, "%+v", p)
		}},
		{"canary starts at 20%", canary, func(t *testing.T, p releasePlan) {
			expect(t, p.Canary && p.CanaryReplicas == 1 && *p.Status.CanaryWeight == 20 && *p.Status.CurrentStep == 0 && p.Waiting && !p.PatchComponent, "%+v", p)
		}},
		{"canary ready pauses", with(canary, func(o *releaseObs) {
			o.Status, o.Canary = inflight(v1alpha1.ReleaseProgressing, step(0)), canaryObs{Ready: true, Replicas: 1}
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.Status.ReleasePhase == v1alpha1.ReleasePaused && *p.Status.CurrentStep == 1 && p.Canary && p.Waiting && p.RequeueAfter == 0, "%+v", p)
			expect(t, hasEvent(p, "Paused"), "events %+v", p.Events)
		}},
		{"ready at the wrong replicas waits", with(canary, func(o *releaseObs) {
			o.Replicas, o.Status, o.Canary = 10, inflight(v1alpha1.ReleaseProgressing, step(0)), canaryObs{Ready: true, Replicas: 1}
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.CanaryReplicas == 2 && *p.Status.CurrentStep == 0 && p.Waiting, "%+v", p)
		}},
		{"promote past the pause patches the Component", with(canary, func(o *releaseObs) {
			o.Status, o.Canary, o.Promote = inflight(v1alpha1.ReleasePaused, step(1)), canaryObs{Ready: true, Replicas: 1}, "true"
			o.Status.CanaryWeight = ptrTo[int32](20)
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.ClearPromote && p.PatchComponent && *p.Status.CurrentStep == 2 && p.Canary && *p.Status.CanaryWeight == 20, "%+v", p)
			expect(t, hasEvent(p, "Promoted") && hasEvent(p, "Promoting"), "events %+v", p.Events)
		}},
		{"promote full skips steps", with(canary, func(o *releaseObs) {
			o.Status, o.Promote = inflight(v1alpha1.ReleaseProgressing, step(0)), PromoteFull
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.ClearPromote && p.PatchComponent && *p.Status.CurrentStep == 2, "%+v", p)
		}},
		{"promoted and rolled succeeds", with(canary, func(o *releaseObs) {
			o.CurRev, o.Status, o.Stable.Rolled = "t", inflight(v1alpha1.ReleaseProgressing, step(2)), true
			o.Status.CanaryWeight = ptrTo[int32](20)
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.DeleteCanary && !p.Canary && p.Status.CanaryWeight == nil && p.Status.ReleasePhase == v1alpha1.ReleaseSucceeded && p.Status.StableRevision == "t", "%+v", p)
		}},
		{"failed canary rolls back", with(canary, func(o *releaseObs) {
			o.Status, o.Canary, o.PodReason = inflight(v1alpha1.ReleaseProgressing, step(0)), canaryObs{Failed: true, Replicas: 1}, "pod web-canary-1: CrashLoopBackOff: back-off"
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.DeleteCanary && !p.Canary && !p.RevertComponent && p.Status.CanaryWeight == nil && p.Status.ReleasePhase == v1alpha1.ReleaseRolledBack, "%+v", p)
			expect(t, strings.Contains(p.Status.History[0].Message, "CrashLoopBackOff"), "%q", p.Status.History[0].Message)
		}},
		{"firing alert rolls back", with(canary, func(o *releaseObs) {
			o.Status, o.Firing = inflight(v1alpha1.ReleasePaused, step(1)), "errors"
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.DeleteCanary && p.Status.ReleasePhase == v1alpha1.ReleaseRolledBack && strings.Contains(p.Message, "Alert errors is firing"), "%+v", p)
		}},
		{"abort", with(canary, func(o *releaseObs) { o.Status, o.Abort = inflight(v1alpha1.ReleasePaused, step(1)), true }), func(t *testing.T, p releasePlan) {
			expect(t, p.ClearAbort && p.DeleteCanary && p.Status.ReleasePhase == v1alpha1.ReleaseAborted && p.Status.History[0].Outcome == v1alpha1.ReleaseAborted, "%+v", p)
		}},
		{"an aborted revision deletes canary objects left behind", with(canary, func(o *releaseObs) {
			o.Status = inflight(v1alpha1.ReleaseAborted, step(1))
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.DeleteCanary && !p.Canary && p.Status.ReleasePhase == v1alpha1.ReleaseAborted, "%+v", p)
		}},
		{"analysis window opens", with(canary, func(o *releaseObs) {
			o.Alerts, o.Analysis = []string{"errors"}, time.Minute
			o.Status, o.Canary = inflight(v1alpha1.ReleaseProgressing, step(0)), canaryObs{Ready: true, Replicas: 1}
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.Status.PausedUntil != nil && p.Status.PausedUntil.Time.Equal(now.Add(time.Minute)) && *p.Status.CurrentStep == 0 && p.Waiting && p.RequeueAfter > 0, "%+v", p)
		}},
		{"analysis window passes", with(canary, func(o *releaseObs) {
			o.Alerts, o.Analysis = []string{"errors"}, time.Minute
			o.Status, o.Canary = inflight(v1alpha1.ReleaseProgressing, step(0)), canaryObs{Ready: true, Replicas: 1}
			o.Status.PausedUntil = ptrTo(metav1.NewTime(now.Add(-time.Second)))
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.Status.PausedUntil == nil && *p.Status.CurrentStep == 1 && p.Status.ReleasePhase == v1alpha1.ReleasePaused, "%+v", p)
		}},
		{"timed pause", with(canary, func(o *releaseObs) {
			o.Steps = []v1alpha1.ReleaseStep{w(20), timed, w(50)}
			o.Status, o.Canary = inflight(v1alpha1.ReleaseProgressing, step(1)), canaryObs{Ready: true, Replicas: 1}
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.Status.ReleasePhase == v1alpha1.ReleasePaused && p.Status.PausedUntil != nil && p.RequeueAfter > 59*time.Second, "%+v", p)
		}},
		{"timed pause ends into the next weight", with(canary, func(o *releaseObs) {
			o.Steps = []v1alpha1.ReleaseStep{w(20), timed, w(50)}
			o.Status, o.Canary = inflight(v1alpha1.ReleasePaused, step(1)), canaryObs{Ready: true, Replicas: 1}
			o.Status.PausedUntil = ptrTo(metav1.NewTime(now.Add(-time.Second)))
		}), func(t *testing.T, p releasePlan) {
			expect(t, *p.Status.CurrentStep == 2 && *p.Status.CanaryWeight == 50 && p.CanaryReplicas == 3 && p.Waiting && p.Status.ReleasePhase == v1alpha1.ReleaseProgressing, "%+v", p)
		}},
		{"routed weight 0 keeps a canary replica", with(canary, func(o *releaseObs) {
			o.Steps, o.Routed = []v1alpha1.ReleaseStep{w(0), pause}, true
		}), func(t *testing.T, p releasePlan) {
			expect(t, p.CanaryReplicas == 1 && *p.Status.CanaryWeight == 0, "%+v", p)
		}},
		{"a new revision supersedes the one under way", with(canary, func(o *releaseObs) {
			o.TargetRev, o.Status = "t2", inflight(v1alpha1.ReleasePaused, step(1))
		}), func(t *testing.T, p releasePlan) {
			expect(t, len(p.Status.History) == 2 && p.Status.History[1].Outcome == v1alpha1.ReleaseAborted && p.Status.History[0].Revision == "t2", "%+v", p.Status.History)
			expect(t, p.Status.CanaryRevision == "t2" && *p.Status.CurrentStep == 0 && p.Canary, "%+v", p)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t, planRelease(c.obs)) })
	}
}

func expect(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}

func hasEvent(p releasePlan, reason string) bool {
	for _, e := range p.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func TestTrimHistory(t *testing.T) {
	h := make([]v1alpha1.ReleaseRevision, 5)
	if got := trimHistory(h, 3); len(got) != 3 {
		t.Fatalf("len %d", len(got))
	}
	if got := trimHistory(h, 10); len(got) != 5 {
		t.Fatalf("len %d", len(got))
	}
}

func TestPodReason(t *testing.T) {
	pods := []podInfo{
		{Name: "a", Waiting: []corev1.ContainerStateWaiting{{Reason: "ContainerCreating"}}},
		{Name: "b", Waiting: []corev1.ContainerStateWaiting{{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nope"`}}},
	}
	if got := PodReason(pods); got != `pod b: ImagePullBackOff: Back-off pulling image "nope"` {
		t.Fatalf("got %q", got)
	}
	if got := PodReason([]podInfo{{Name: "c", Unschedulable: "Unschedulable: 0/3 nodes"}}); got != "pod c: Unschedulable: 0/3 nodes" {
		t.Fatalf("got %q", got)
	}
	if got := PodReason(pods[:1]); got != "" {
		t.Fatalf("got %q", got)
	}
}

func TestValidateReleaseSpec(t *testing.T) {
	w := func(v int32) v1alpha1.ReleaseStep { return v1alpha1.ReleaseStep{SetWeight: &v} }
	both := w(10)
	both.Pause = &v1alpha1.ReleasePause{}
	for _, c := range []struct {
		name  string
		spec  v1alpha1.ReleaseSpec
		field string // "" valid
	}{
		{"rolling", v1alpha1.ReleaseSpec{Component: "web", Image: "web:2"}, ""},
		{"canary", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary, Steps: []v1alpha1.ReleaseStep{w(20), {Pause: &v1alpha1.ReleasePause{}}, w(100)}}}, ""},
		{"canary without steps", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary}}, "spec.strategy.steps"},
		{"both", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary, Steps: []v1alpha1.ReleaseStep{both}}}, "spec.strategy.steps[0]"},
		{"neither", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary, Steps: []v1alpha1.ReleaseStep{{}}}}, "spec.strategy.steps[0]"},
		{"over 100", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary, Steps: []v1alpha1.ReleaseStep{w(101)}}}, "spec.strategy.steps[0].setWeight"},
		{"decreasing", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Type: v1alpha1.ReleaseCanary, Steps: []v1alpha1.ReleaseStep{w(50), w(20)}}}, "spec.strategy.steps[1].setWeight"},
		{"steps on rolling", v1alpha1.ReleaseSpec{Component: "web", Strategy: v1alpha1.ReleaseStrategy{Steps: []v1alpha1.ReleaseStep{w(50)}}}, "spec.strategy.steps"},
		{"placeholder", v1alpha1.ReleaseSpec{Component: "web", Env: []corev1.EnvVar{{Name: "DSN", Value: "${resources.orders.url}"}}}, ""},
		{"malformed placeholder", v1alpha1.ReleaseSpec{Component: "web", Env: []corev1.EnvVar{{Name: "A", Value: "a"}, {Name: "DSN", Value: "${resources.orders}"}}}, "spec.env[1].value"},
	} {
		errs := ValidateReleaseSpec(&c.spec)
		switch {
		case c.field == "" && len(errs) > 0:
			t.Errorf("%s: unexpected %v", c.name, errs)
		case c.field != "" && (len(errs) == 0 || errs[0].Field != c.field):
			t.Errorf("%s: want an error on %s, got %v", c.name, c.field, errs)
		}
	}
}
