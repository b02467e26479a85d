package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// The Release's step machine: what one look at the cluster (releaseObs) means for the
// rollout (releasePlan). Pure; the driver gathers the observations and carries out the plan.

// Release defaults.
const (
	DefaultReleaseDeadline  = 600 * time.Second
	DefaultReleaseHistory   = 10
	DefaultAnalysisDuration = time.Minute
	releasePollInterval     = 5 * time.Second
	PromoteFull             = "full" // kubeos.dev/promote=full skips the remaining steps
	ReleaseSuperseded       = "superseded by a newer revision"
	ReleaseStableAnnotation = "kubeos.dev/release-stable"
)

// revisionSpec is what a revision changes in a Component: its image and environment.
type revisionSpec struct {
	Image string          `json:"image"`
	Env   []corev1.EnvVar `json:"env,omitempty"`
}

// mergeRevision applies a Release's image and env (merged by name) over a Component's.
// It is idempotent: merging the result again with the same Release gives the same spec,
// so the revision a Release ships is the same before and after the Component is patched.
func mergeRevision(base revisionSpec, image string, env []corev1.EnvVar) revisionSpec {
	out := revisionSpec{Image: base.Image}
	if image != "" {
		out.Image = image
	}
	out.Env = make([]corev1.EnvVar, 0, len(base.Env)+len(env))
	seen := map[string]int{}
	for _, e := range base.Env {
		seen[e.Name] = len(out.Env)
		out.Env = append(out.Env, e)
	}
	for _, e := range env {
		if i, ok := seen[e.Name]; ok {
			out.Env[i] = e
			continue
		}
		seen[e.Name] = len(out.Env)
		out.Env = append(out.Env, e)
	}
	if len(out.Env) == 0 {
		out.Env = nil
	}
	return out
}

// revisionHash names a revision: 10 hex digits of the hash of its image and env.
func revisionHash(r revisionSpec) string {
	b, _ := json.Marshal(r)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:5])
}

// canaryObs is what the canary Deployment says.
type canaryObs struct {
	// Ready: it runs the wanted replicas, all updated and available.
	Ready bool
	// Failed: its progress deadline passed (Progressing=False ProgressDeadlineExceeded).
	Failed bool
	// Replicas it is asked to run.
	Replicas int32
}

// stableObs is what the Component's own Deployment says, once it runs the target.
type stableObs struct {
	// Rolled: the Component and its Deployment observed the target and the Deployment is
	// complete.
	Rolled bool
	// Failed: the Deployment's progress deadline passed.
	Failed bool
}

// releaseObs is one look at a Release and what it ships.
type releaseObs struct {
	Now       time.Time
	Strategy  string
	Steps     []v1alpha1.ReleaseStep
	Alerts    []string // analysis
	Analysis  time.Duration
	Deadline  time.Duration
	TargetRev string // the revision the Release ships: merge(Component, Release)
	CurRev    string // the Component's current revision
	Image     string // the target's image
	Promote   string // the promote annotation's value ("": none)
	Abort     bool
	Routed    bool  // a Route fronts the Component
	Replicas  int32 // the stable Deployment's replicas
	Canary    canaryObs
	Stable    stableObs
	Firing    string // a named analysis Alert that fires ("": none)
	PodReason string // why the pods of the revision are not ready ("": unknown)
	Status    v1alpha1.ReleaseStatus
}

// releasePlan is what to do and the status to write.
type releasePlan struct {
	// PatchComponent sets the Component's image/env to the target (saving the stable
	// spec in its ReleaseStableAnnotation) with the rollout strategy annotation.
	PatchComponent bool
	Strategy       string // RollingUpdate or Recreate
	// RevertComponent patches the Component back to the saved stable spec.
	RevertComponent bool
	// Canary: ensure the canary Deployment (with CanaryReplicas) and the Services.
	Canary         bool
	CanaryReplicas int32
	DeleteCanary   bool
	ClearPromote   bool
	ClearAbort     bool
	// Status is the status to write; Events are the steps taken (reason, message; Warning
	// when warn).
	Status       v1alpha1.ReleaseStatus
	Events       []releaseEvent
	Waiting      bool // the rollout is under way (lifecycle phase Reconciling)
	Message      string
	RequeueAfter time.Duration
}

type releaseEvent struct {
	Reason, Message string
	Warn            bool
}

// inFlight reports whether a rollout of rev is under way.
func inFlight(st v1alpha1.ReleaseStatus, rev string) bool {
	return (st.ReleasePhase == v1alpha1.ReleaseProgressing || st.ReleasePhase == v1alpha1.ReleasePaused) && st.CanaryRevision == rev
}

// canaryReplicas is the canary's share of replicas at weight w: ceil(w% × replicas), at
// least 1 when a Route does the weighting (the canary must serve its share).
func canaryReplicas(w, replicas int32, routed bool) int32 {
	n := (w*replicas + 99) / 100
	if routed && n < 1 {
		n = 1
	}
	if n < 0 {
		n = 0
	}
	return n
}

// weightAt is the weight in force at step i: the last setWeight at or before it.
func weightAt(steps []v1alpha1.ReleaseStep, i int) int32 {
	var w int32
	for j := 0; j <= i && j < len(steps); j++ {
		if steps[j].SetWeight != nil {
			w = *steps[j].SetWeight
		}
	}
	return w
}

// planRelease decides the next move of a Release.
func planRelease(o releaseObs) releasePlan {
	p := releasePlan{Status: *o.Status.DeepCopy()}
	st := &p.Status
	p.ClearAbort = o.Abort
	p.ClearPromote = o.Promote != ""
	if !inFlight(o.Status, o.TargetRev) {
		if inFlight(o.Status, o.Status.CanaryRevision) {
			// The Release changed under a rollout: the old revision ends, the new one starts.
			p.end(o, v1alpha1.ReleaseAborted, ReleaseSuperseded, false)
			p.DeleteCanary = true
		}
		switch {
		case o.TargetRev == o.CurRev:
			// In this case and the next no revision is under way, so no canary objects
			// should exist and any left are deleted: a reconcile that read a stale Release
			// (still in flight) can re-create the canary just after an abort or promotion
			// deleted it (its status write then conflicts).
			p.DeleteCanary = true
			// Nothing to ship: the Component runs what the Release says.
			st.StableRevision = o.CurRev
			if st.ReleasePhase == "" || st.ReleasePhase == v1alpha1.ReleaseProgressing || st.ReleasePhase == v1alpha1.ReleasePaused {
				st.ReleasePhase = v1alpha1.ReleaseSucceeded
			}
			p.Message = "the Component runs revision " + o.CurRev
			return p
		case st.CanaryRevision == o.TargetRev && (st.ReleasePhase == v1alpha1.ReleaseRolledBack || st.ReleasePhase == v1alpha1.ReleaseAborted):
			// This revision was rolled back or aborted: not retried until the spec changes.
			p.DeleteCanary = true
			p.Message = fmt.Sprintf("revision %s %s", o.TargetRev, st.ReleasePhase)
			if len(st.History) > 0 && st.History[0].Message != "" {
				p.Message += ": " + st.History[0].Message
			}
			return p
		}
		p.start(o)
		o.Abort = false // an abort set before the start is not for this revision (it is cleared)
	}
	if o.Abort {
		p.end(o, v1alpha1.ReleaseAborted, "aborted by the "+v1alpha1.AbortAnnotation+" annotation", true)
		return p
	}
	if o.Strategy != v1alpha1.ReleaseCanary {
		return p.rolling(o)
	}
	return p.canary(o)
}

// start begins a rollout of the target revision.
func (p *releasePlan) start(o releaseObs) {
	st := &p.Status
	st.StableRevision = o.CurRev
	st.CanaryRevision = o.TargetRev
	st.ReleasePhase = v1alpha1.ReleaseProgressing
	st.PausedUntil = nil
	st.CanaryWeight = nil
	st.CurrentStep = nil
	if o.Strategy == v1alpha1.ReleaseCanary {
		st.CurrentStep = ptrTo[int32](0)
	}
	st.History = append([]v1alpha1.ReleaseRevision{{Revision: o.TargetRev, Image: o.Image, Started: metaTime(o.Now)}}, st.History...)
	p.event(false, "RevisionStarted", fmt.Sprintf("revision %s (%s) from %s, strategy %s", o.TargetRev, o.Image, o.CurRev, strategyName(o.Strategy)))
}

func strategyName(s string) string {
	if s == "" {
		return v1alpha1.ReleaseRolling
	}
	return s
}

// rolling is a Rolling or Recreate rollout: the Component is patched, its Deployment
// watched until complete or the deadline.
func (p *releasePlan) rolling(o releaseObs) releasePlan {
	strategy := "RollingUpdate"
	if o.Strategy == v1alpha1.ReleaseRecreate {
		strategy = "Recreate"
	}
	if o.CurRev != o.TargetRev {
		p.PatchComponent, p.Strategy = true, strategy
	}
	started := o.Now
	if h := p.Status.History; len(h) > 0 {
		started = h[0].Started.Time
	}
	switch {
	case o.CurRev == o.TargetRev && o.Stable.Rolled:
		p.end(o, v1alpha1.ReleaseSucceeded, "rolled out", false)
	case o.Stable.Failed || !o.Now.Before(started.Add(o.Deadline)):
		p.PatchComponent = false
		p.RevertComponent = true
		p.end(o, v1alpha1.ReleaseRolledBack, notReady(o), true)
	default:
		p.wait(fmt.Sprintf("rolling out revision %s (%s)", o.TargetRev, strategy), min(releasePollInterval, started.Add(o.Deadline).Sub(o.Now)+time.Millisecond))
	}
	return *p
}

func notReady(o releaseObs) string {
	msg := fmt.Sprintf("not ready within the progress deadline (%s)", o.Deadline)
	if o.PodReason != "" {
		msg += ": " + o.PodReason
	}
	return msg
}

// canary walks the steps.
func (p *releasePlan) canary(o releaseObs) releasePlan {
	st := &p.Status
	step := 0
	if st.CurrentStep != nil {
		step = int(*st.CurrentStep)
	}
	promoted := o.Promote
	if o.Firing != "" {
		p.RevertComponent = step >= len(o.Steps) && o.CurRev == o.TargetRev
		p.end(o, v1alpha1.ReleaseRolledBack, fmt.Sprintf("analysis failed: Alert %s is firing", o.Firing), true)
		return *p
	}
	for step < len(o.Steps) {
		w := weightAt(o.Steps, step)
		p.Canary, p.CanaryReplicas = true, canaryReplicas(w, o.Replicas, o.Routed)
		st.CanaryWeight = ptrTo(w)
		st.CurrentStep = ptrTo(int32(step))
		if o.Canary.Failed {
			p.end(o, v1alpha1.ReleaseRolledBack, "canary "+notReady(o), true)
			return *p
		}
		s := o.Steps[step]
		advance := false
		switch {
		case promoted == PromoteFull:
			step = len(o.Steps)
			p.event(false, "Promoted", "promoted past the remaining steps")
			st.PausedUntil = nil
			continue
		case promoted != "":
			promoted = ""
			advance = true
			p.event(false, "Promoted", fmt.Sprintf("step %d/%d promoted", step+1, len(o.Steps)))
		case s.SetWeight != nil:
			if !o.Canary.Ready || o.Canary.Replicas != p.CanaryReplicas {
				p.wait(fmt.Sprintf("step %d/%d: canary at %d%% (%d replicas) becoming ready", step+1, len(o.Steps), w, p.CanaryReplicas), releasePollInterval)
				return *p
			}
			if len(o.Alerts) == 0 {
				advance = true
				break
			}
			if st.PausedUntil == nil {
				st.PausedUntil = ptrTo(metaTime(o.Now.Add(o.Analysis)))
				p.event(false, "Analysis", fmt.Sprintf("step %d/%d: analysis of %v for %s", step+1, len(o.Steps), o.Alerts, o.Analysis))
			}
			if o.Now.Before(st.PausedUntil.Time) {
				p.wait(fmt.Sprintf("step %d/%d: analysis until %s", step+1, len(o.Steps), st.PausedUntil.UTC().Format(time.RFC3339)), st.PausedUntil.Sub(o.Now)+time.Millisecond)
				return *p
			}
			advance = true
		case s.Pause != nil && s.Pause.Duration != nil:
			if st.PausedUntil == nil {
				st.PausedUntil = ptrTo(metaTime(o.Now.Add(s.Pause.Duration.Duration)))
				p.event(false, "Paused", fmt.Sprintf("step %d/%d: paused for %s", step+1, len(o.Steps), s.Pause.Duration.Duration))
			}
			if o.Now.Before(st.PausedUntil.Time) {
				st.ReleasePhase = v1alpha1.ReleasePaused
				p.wait(fmt.Sprintf("step %d/%d: paused until %s", step+1, len(o.Steps), st.PausedUntil.UTC().Format(time.RFC3339)), st.PausedUntil.Sub(o.Now)+time.Millisecond)
				return *p
			}
			advance = true
		default: // pause until promoted
			if st.ReleasePhase != v1alpha1.ReleasePaused {
				p.event(false, "Paused", fmt.Sprintf("step %d/%d: paused until promoted", step+1, len(o.Steps)))
			}
			st.ReleasePhase = v1alpha1.ReleasePaused
			p.wait(fmt.Sprintf("step %d/%d: paused until promoted (kubectl kube promote release/NAME or the %s annotation)", step+1, len(o.Steps), v1alpha1.PromoteAnnotation), 0)
			return *p
		}
		if advance {
			st.PausedUntil = nil
			st.ReleasePhase = v1alpha1.ReleaseProgressing
			step++
			if step < len(o.Steps) {
				p.event(false, "Step", fmt.Sprintf("step %d/%d: %s", step+1, len(o.Steps), describeStep(o.Steps[step])))
			}
		}
	}
	// All steps done: the Component gets the revision; the canary goes once it rolled.
	st.CurrentStep = ptrTo(int32(len(o.Steps)))
	st.ReleasePhase = v1alpha1.ReleaseProgressing
	st.PausedUntil = nil
	if o.CurRev != o.TargetRev {
		p.PatchComponent, p.Strategy = true, "RollingUpdate"
		p.Canary = !o.Canary.Failed && st.CanaryWeight != nil
		if p.Canary {
			p.CanaryReplicas = canaryReplicas(*st.CanaryWeight, o.Replicas, o.Routed)
		}
		p.event(false, "Promoting", fmt.Sprintf("the Component gets revision %s", o.TargetRev))
		p.wait("promoting: the Component rolls to revision "+o.TargetRev, releasePollInterval)
		return *p
	}
	switch {
	case o.Stable.Rolled:
		p.end(o, v1alpha1.ReleaseSucceeded, "promoted", false)
	case o.Stable.Failed:
		p.RevertComponent = true
		p.end(o, v1alpha1.ReleaseRolledBack, notReady(o), true)
	default:
		p.Canary = st.CanaryWeight != nil
		if p.Canary {
			p.CanaryReplicas = canaryReplicas(*st.CanaryWeight, o.Replicas, o.Routed)
		}
		p.wait("promoting: the Component rolls to revision "+o.TargetRev, releasePollInterval)
	}
	return *p
}

func describeStep(s v1alpha1.ReleaseStep) string {
	switch {
	case s.SetWeight != nil:
		return fmt.Sprintf("setWeight %d", *s.SetWeight)
	case s.Pause != nil && s.Pause.Duration != nil:
		return "pause " + s.Pause.Duration.Duration.String()
	default:
		return "pause until promoted"
	}
}

func (p *releasePlan) wait(msg string, after time.Duration) {
	p.Waiting, p.Message = true, msg
	if after > 0 && (p.RequeueAfter == 0 || after < p.RequeueAfter) {
		p.RequeueAfter = after
	}
}

func (p *releasePlan) event(warn bool, reason, msg string) {
	p.Events = append(p.Events, releaseEvent{Reason: reason, Message: msg, Warn: warn})
}

// end closes the revision under way with its outcome.
func (p *releasePlan) end(o releaseObs, outcome, msg string, warn bool) {
	st := &p.Status
	if outcome != v1alpha1.ReleaseSucceeded || o.Strategy == v1alpha1.ReleaseCanary {
		p.DeleteCanary = true
	}
	p.Canary = false
	st.CanaryWeight = nil
	st.PausedUntil = nil
	st.CurrentStep = nil
	if outcome == v1alpha1.ReleaseSucceeded {
		st.StableRevision = st.CanaryRevision
	}
	if msg != ReleaseSuperseded {
		st.ReleasePhase = outcome
	}
	if len(st.History) > 0 && st.History[0].Outcome == "" {
		st.History[0].Outcome = outcome
		st.History[0].Ended = ptrTo(metaTime(o.Now))
		st.History[0].Message = msg
	}
	p.Waiting = false
	p.Message = fmt.Sprintf("revision %s %s: %s", st.CanaryRevision, outcome, msg)
	p.event(warn, outcome, p.Message)
}

// trimHistory keeps the newest limit revisions.
func trimHistory(h []v1alpha1.ReleaseRevision, limit int) []v1alpha1.ReleaseRevision {
	if limit > 0 && len(h) > limit {
		return h[:limit]
	}
	return h
}

func ptrTo[T any](v T) *T { return &v }

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
