package simnode

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Container states a stage moves a pod's containers to (Next.Containers).
const (
	// Creating: the sandbox is up — the pod has its IP, PodReadyToStartContainers is True,
	// containers wait with reason ContainerCreating (PodInitializing while init containers
	// have not completed).
	Creating = "Creating"
	// Running: init containers completed, containers running since now, ready (unless
	// Next.Ready is false) and started.
	Running = "Running"
	// Terminated: containers exited with Next.ExitCode (reason Completed for 0, else Error
	// unless Next.Reason says). A pod that would restart them (restartPolicy Always, or
	// OnFailure with a non-zero code) goes to CrashLoopBackOff instead, unless it is being
	// deleted.
	Terminated = "Terminated"
	// CrashLoopBackOff: containers exited (lastState terminated with Next.ExitCode, default
	// 1), restartCount grows, they wait with reason CrashLoopBackOff. Under restartPolicy
	// Never they stay terminated instead.
	CrashLoopBackOff = "CrashLoopBackOff"
)

// Annotations and labels of simulated objects.
const (
	// RunTimeAnnotation on a pod is how long its containers run before they exit 0 when
	// its restartPolicy is Never or OnFailure (a Go duration), in place of Options.JobRunTime.
	RunTimeAnnotation = "sim.kubeos.dev/run-time"
	// HeartbeatAnnotation on a simulated Node set to "stopped" stops its Lease renewals and
	// status reports (the node goes silent, as a machine that lost power); any other value
	// or none resumes them.
	HeartbeatAnnotation = "sim.kubeos.dev/heartbeat"
	// NodeAnnotation marks simulated Nodes (as kwok's kwok.x-k8s.io/node: fake).
	NodeAnnotation = "sim.kubeos.dev/node"
	// PodCIDRAnnotation on a simulated Node is the simulator's own pod range for it, used
	// until the Node has a spec.podCIDR (from the node IPAM controller).
	PodCIDRAnnotation = "sim.kubeos.dev/pod-cidr"
	// TypeLabel=TypeValue marks simulated Nodes (as kwok's type=kwok).
	TypeLabel = "type"
	TypeValue = "kube-sim"
)

// Stage is one rule of the pod state machine, as kwok's Stage: pods its Selector matches
// get Next after Delay (plus up to Jitter). The table is ordered: the first stage whose
// selector matches is the one that applies; after it the pod is matched again.
type Stage struct {
	Name     string   `json:"name"`
	Selector Selector `json:"selector"`
	// Delay before Next applies, counted from when the stage started matching (or from
	// the containers' start, DelayFrom ContainerStarted). Zero-delay stages apply at once
	// and in one status write with the stages after them.
	Delay  metav1.Duration `json:"delay,omitempty"`
	Jitter metav1.Duration `json:"jitter,omitempty"`
	// DelayAnnotation names a pod annotation holding a Go duration that replaces Delay.
	DelayAnnotation string `json:"delayAnnotation,omitempty"`
	// DelayFrom is "" (now) or "ContainerStarted".
	DelayFrom string `json:"delayFrom,omitempty"`
	// Backoff doubles Delay for each restart the containers had (restartCount - 1), capped
	// at five minutes, as the kubelet's CrashLoopBackOff.
	Backoff bool `json:"backoff,omitempty"`
	Next    Next `json:"next"`
}

// Next is what a stage does: the containers' new state, their readiness, and whether the
// pod is then deleted (the kubelet's final DELETE with grace 0 and a UID precondition).
type Next struct {
	Containers string `json:"containers,omitempty"`
	// Ready of running containers; nil means true.
	Ready    *bool  `json:"ready,omitempty"`
	ExitCode int32  `json:"exitCode,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Delete   bool   `json:"delete,omitempty"`
	// Resync writes the status the containers give and changes nothing: a kubelet's status
	// manager putting back what another writer changed (Ready=False from the node
	// lifecycle controller while the node's heartbeat was late).
	Resync bool `json:"resync,omitempty"`
}

// Selector is kwok's stage selector: all of its parts must match.
type Selector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	MatchExpressions []Expression      `json:"matchExpressions,omitempty"`
}

// Expression tests one field of the pod, named as kwok's jq-like paths (FieldKeys lists
// them), or a label ("metadata.labels.<k>") or an annotation
// ("metadata.annotations.<k>").
type Expression struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"` // In, NotIn, Exists, DoesNotExist
	Values   []string `json:"values,omitempty"`
}

// DelayFrom values.
const DelayFromContainerStarted = "ContainerStarted"

// maxBackoff caps Backoff delays (the kubelet's MaxContainerBackOff).
const maxBackoff = 5 * time.Minute

// DefaultStages is the kubelet's pod lifecycle with no delays, in its order: the sandbox
// (pod IP, PodReadyToStartContainers), then containers running and ready; pods with
// restartPolicy Never or OnFailure finish (exit 0) jobRunTime after their containers
// started; crashed containers restart after the kubelet's back-off (10 s doubling); a
// pod being deleted has its containers stopped and is then deleted.
func DefaultStages(jobRunTime time.Duration) []Stage {
	st := []Stage{
		{Name: "pod-delete", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".metadata.deletionTimestamp", Operator: "Exists"},
			{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"terminated"}}}},
			Next: Next{Delete: true}},
		{Name: "pod-terminate", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".metadata.deletionTimestamp", Operator: "Exists"}}},
			Next: Next{Containers: Terminated}},
		{Name: "pod-sandbox", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".status.containerStatuses.state", Operator: "DoesNotExist"}}},
			Next: Next{Containers: Creating}},
		{Name: "pod-start", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".status.containerStatuses.reason", Operator: "In", Values: []string{"ContainerCreating", "PodInitializing"}}}},
			Next: Next{Containers: Running}},
		{Name: "pod-restart", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".status.containerStatuses.reason", Operator: "In", Values: []string{"CrashLoopBackOff"}}}},
			Delay: metav1.Duration{Duration: 10 * time.Second}, Backoff: true,
			Next: Next{Containers: Running}},
		// Ready=False written by someone else (the node lifecycle controller marks a node's
		// pods not ready when its Lease is late) while the containers run and are ready:
		// put back at the kubelet's status sync period.
		{Name: "pod-ready-restore", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".status.conditions.Ready", Operator: "In", Values: []string{"True"}},
			{Key: ".status.conditions.Ready.written", Operator: "In", Values: []string{"False"}}}},
			Delay: metav1.Duration{Duration: 10 * time.Second}, Next: Next{Resync: true}},
	}
	if jobRunTime >= 0 {
		st = append(st, Stage{Name: "pod-complete", Selector: Selector{MatchExpressions: []Expression{
			{Key: ".spec.restartPolicy", Operator: "In", Values: []string{"Never", "OnFailure"}},
			{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
			Delay: metav1.Duration{Duration: jobRunTime}, DelayAnnotation: RunTimeAnnotation, DelayFrom: DelayFromContainerStarted,
			Next: Next{Containers: Terminated}})
	}
	return st
}

// LoadStages reads a YAML or JSON list of stages; unknown fields are refused.
func LoadStages(path string) ([]Stage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stages: %w", err)
	}
	var st []Stage
	if err := yaml.UnmarshalStrict(b, &st); err != nil {
		return nil, fmt.Errorf("stages %s: %w", path, err)
	}
	if _, err := compile(st); err != nil {
		return nil, fmt.Errorf("stages %s: %w", path, err)
	}
	return st, nil
}

// fieldGetter reads one field of a pod's view: its value and whether it exists.
type fieldGetter func(v *podView) (string, bool)

// FieldKeys are the pod fields expressions may test.
var FieldKeys = map[string]fieldGetter{
	".metadata.name":              func(v *podView) (string, bool) { return v.name, true },
	".metadata.namespace":         func(v *podView) (string, bool) { return v.namespace, true },
	".metadata.deletionTimestamp": func(v *podView) (string, bool) { return "", v.deleting },
	".metadata.ownerReferences.kind": func(v *podView) (string, bool) {
		return v.ownerKind, v.ownerKind != ""
	},
	".spec.nodeName": func(v *podView) (string, bool) { return v.nodeName, true },
	// The first container's image (kwok's .spec.containers.[].image, for one container).
	".spec.containers.image": func(v *podView) (string, bool) {
		if len(v.shape.containers) == 0 {
			return "", false
		}
		return v.shape.containers[0].image, true
	},
	".spec.restartPolicy": func(v *podView) (string, bool) { return string(v.shape.restartPolicy), true },
	".status.phase":       func(v *podView) (string, bool) { return string(v.phase()), true },
	".status.podIP":       func(v *podView) (string, bool) { return ipString(v.ip), v.ip != 0 },
	".status.containerStatuses.state": func(v *podView) (string, bool) {
		switch v.state {
		case stateCreating, stateCrashLoop:
			return "waiting", true
		case stateRunning:
			return "running", true
		case stateTerminated:
			return "terminated", true
		}
		return "", false
	},
	".status.containerStatuses.reason": func(v *podView) (string, bool) { return v.reason, v.reason != "" },
	".status.conditions.Ready": func(v *podView) (string, bool) {
		if v.state == stateNone {
			return "", false
		}
		if v.podReady() {
			return "True", true
		}
		return "False", true
	},
	// The Ready condition as the pod carries it (.status.conditions.Ready is what the
	// simulated kubelet writes for its containers).
	".status.conditions.Ready.written": func(v *podView) (string, bool) {
		return string(v.readyWritten), v.readyWritten != ""
	},
}

const (
	labelKeyPrefix      = "metadata.labels."
	annotationKeyPrefix = "metadata.annotations."
)

// table is a compiled stage list: selectors resolved to getters, and the labels and
// annotations any of them reads (a pod's view keeps only those).
type table struct {
	stages []compiledStage
	attrs  []attrKey
}

type attrKey struct {
	annotation bool
	key        string
}

type compiledStage struct {
	Stage
	tests     []test
	delayAttr int // index in attrs of DelayAnnotation, -1 without
}

type test struct {
	get    fieldGetter
	op     string
	values []string
}

func compile(stages []Stage) (*table, error) {
	t := &table{}
	attr := func(annotation bool, key string) int {
		k := attrKey{annotation, key}
		if i := slices.Index(t.attrs, k); i >= 0 {
			return i
		}
		t.attrs = append(t.attrs, k)
		return len(t.attrs) - 1
	}
	attrGetter := func(i int) fieldGetter {
		return func(v *podView) (string, bool) {
			if i < len(v.attrs) && v.attrs[i] != nil {
				return *v.attrs[i], true
			}
			return "", false
		}
	}
	for _, s := range stages {
		if s.Name == "" {
			return nil, errors.New("a stage without a name")
		}
		cs := compiledStage{Stage: s, delayAttr: -1}
		switch s.Next.Containers {
		case "", Creating, Running, Terminated, CrashLoopBackOff:
		default:
			return nil, fmt.Errorf("stage %s: next.containers %q is not one of Creating, Running, Terminated, CrashLoopBackOff", s.Name, s.Next.Containers)
		}
		if s.Next.Containers == "" && !s.Next.Delete && !s.Next.Resync {
			return nil, fmt.Errorf("stage %s: next does nothing (set containers, delete or resync)", s.Name)
		}
		if s.DelayFrom != "" && s.DelayFrom != DelayFromContainerStarted {
			return nil, fmt.Errorf("stage %s: delayFrom %q is not %q", s.Name, s.DelayFrom, DelayFromContainerStarted)
		}
		if s.Delay.Duration < 0 || s.Jitter.Duration < 0 {
			return nil, fmt.Errorf("stage %s: negative delay or jitter", s.Name)
		}
		for _, k := range sortedKeys(s.Selector.MatchLabels) {
			cs.tests = append(cs.tests, test{get: attrGetter(attr(false, k)), op: "In", values: []string{s.Selector.MatchLabels[k]}})
		}
		for _, k := range sortedKeys(s.Selector.MatchAnnotations) {
			cs.tests = append(cs.tests, test{get: attrGetter(attr(true, k)), op: "In", values: []string{s.Selector.MatchAnnotations[k]}})
		}
		for _, e := range s.Selector.MatchExpressions {
			var g fieldGetter
			switch {
			case len(e.Key) > len(labelKeyPrefix) && e.Key[:len(labelKeyPrefix)] == labelKeyPrefix:
				g = attrGetter(attr(false, e.Key[len(labelKeyPrefix):]))
			case len(e.Key) > len(annotationKeyPrefix) && e.Key[:len(annotationKeyPrefix)] == annotationKeyPrefix:
				g = attrGetter(attr(true, e.Key[len(annotationKeyPrefix):]))
			default:
				g = FieldKeys[e.Key]
			}
			if g == nil {
				return nil, fmt.Errorf("stage %s: unknown key %q (fields: %v, or %s<k>, %s<k>)", s.Name, e.Key, sortedKeys(FieldKeys), labelKeyPrefix, annotationKeyPrefix)
			}
			switch e.Operator {
			case "In", "NotIn":
				if len(e.Values) == 0 {
					return nil, fmt.Errorf("stage %s: %s %s needs values", s.Name, e.Key, e.Operator)
				}
			case "Exists", "DoesNotExist":
				if len(e.Values) != 0 {
					return nil, fmt.Errorf("stage %s: %s %s takes no values", s.Name, e.Key, e.Operator)
				}
			default:
				return nil, fmt.Errorf("stage %s: operator %q is not In, NotIn, Exists or DoesNotExist", s.Name, e.Operator)
			}
			cs.tests = append(cs.tests, test{get: g, op: e.Operator, values: e.Values})
		}
		if s.DelayAnnotation != "" {
			cs.delayAttr = attr(true, s.DelayAnnotation)
		}
		t.stages = append(t.stages, cs)
	}
	if len(t.attrs) > 64 {
		return nil, fmt.Errorf("stages read %d labels and annotations (at most 64)", len(t.attrs))
	}
	return t, nil
}

func (t test) match(v *podView) bool {
	val, ok := t.get(v)
	switch t.op {
	case "Exists":
		return ok
	case "DoesNotExist":
		return !ok
	case "In":
		return ok && slices.Contains(t.values, val)
	default: // NotIn
		return !ok || !slices.Contains(t.values, val)
	}
}

// match is the index of the first stage matching v, or -1.
func (t *table) match(v *podView) int {
	for i := range t.stages {
		ok := true
		for _, ts := range t.stages[i].tests {
			if !ts.match(v) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// due is when stage i applies to v, which started matching at since; jitter is a
// number in [0, 1).
func (t *table) due(i int, v *podView, since time.Time, jitter float64) time.Time {
	s := &t.stages[i]
	d := s.Delay.Duration
	if s.delayAttr >= 0 && s.delayAttr < len(v.attrs) && v.attrs[s.delayAttr] != nil {
		if ad, err := time.ParseDuration(*v.attrs[s.delayAttr]); err == nil && ad >= 0 {
			d = ad
		}
	}
	if s.Backoff && v.restarts > 1 {
		n := min(v.restarts-1, 30)
		d = time.Duration(math.Min(float64(d)*math.Pow(2, float64(n)), float64(maxBackoff)))
		if d > maxBackoff {
			d = maxBackoff
		}
	}
	from := since
	if s.DelayFrom == DelayFromContainerStarted && v.startedAt != 0 {
		from = time.Unix(v.startedAt, 0)
	}
	return from.Add(d + time.Duration(jitter*float64(s.Jitter.Duration)))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
