package ctl

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

func node(id, phase string, ready metav1.ConditionStatus, edges ...string) opsapi.Node {
	kind, ns, name := splitID(id)
	return opsapi.Node{ID: id, Kind: kind, Namespace: ns, Name: name, Phase: phase, Edges: edges,
		Conditions: []metav1.Condition{{Type: "Ready", Status: ready, Reason: phase + "Reason", Message: phase + " message"}}}
}

func names(rows []TreeRow) []string {
	var out []string
	for _, r := range rows {
		s := r.Prefix + r.Node.Name
		if r.Note != "" {
			s += " [" + r.Note + "]"
		}
		out = append(out, s)
	}
	return out
}

func TestTree(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    opsapi.Graph
		want []string
	}{
		{"chain", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Active", "True", "A/n/b"), node("A/n/b", "Active", "True", "A/n/c"), node("A/n/c", "Active", "True")}},
			[]string{"a", "└─b", "  └─c"}},
		{"diamond: the second parent gets a back-reference", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{
			node("A/n/a", "Active", "True", "A/n/b", "A/n/c"), node("A/n/b", "Active", "True", "A/n/d"), node("A/n/c", "Active", "True", "A/n/d"), node("A/n/d", "Active", "True", "A/n/e"), node("A/n/e", "Active", "True")}},
			[]string{"a", "├─b", "│ └─d", "│   └─e", "└─c", "  └─d [back-reference]"}},
		{"cycle: marked, walk ends", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "A/n/b"), node("A/n/b", "Pending", "False", "A/n/a")}},
			[]string{"a", "└─b", "  └─a [cycle]"}},
		{"self-loop", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "A/n/a")}},
			[]string{"a", "└─a [cycle]"}},
		{"edge to a node the server did not send: missing", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "B/n/x")}},
			[]string{"a", "└─x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(Tree(&tc.g))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestStatus(t *testing.T) {
	now := metav1.Now()
	del := node("A/n/a", "Deleting", "False")
	del.DeletionTimestamp, del.Finalizers = &now, []string{"kubeos.dev/lifecycle", "x/y"}
	stalled := node("A/n/s", "Failed", "False")
	stalled.Conditions = append(stalled.Conditions, metav1.Condition{Type: "Stalled", Status: "True", Reason: "SecretConflict", Message: "taken"})
	for _, tc := range []struct {
		n                         opsapi.Node
		ready, phase, reason, msg string
	}{
		{node("A/n/a", "Active", "True"), "True", "Active", "ActiveReason", "Active message"},
		{opsapi.Node{Missing: true}, "-", "Missing", "NotFound", "the object does not exist"},
		{opsapi.Node{Hidden: true}, "-", "Hidden", "Forbidden", "you may not read this object"},
		{del, "False", "Deleting", "Finalizers: kubeos.dev/lifecycle,x/y", "Deleting message"},
		{stalled, "False", "Failed", "SecretConflict", "taken"},
		{opsapi.Node{}, "Unknown", "Pending", "", ""},
	} {
		r, p, re, m := Status(tc.n)
		if r != tc.ready || p != tc.phase || re != tc.reason || m != tc.msg {
			t.Errorf("Status(%s) = %q %q %q %q, want %q %q %q %q", tc.n.ID, r, p, re, m, tc.ready, tc.phase, tc.reason, tc.msg)
		}
	}
}

func TestBlame(t *testing.T) {
	failed := node("A/n/f", "Failed", "False")
	for _, tc := range []struct {
		name string
		g    opsapi.Graph
		want string
	}{
		{"ready root", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Active", "True", "A/n/b"), node("A/n/b", "Active", "True")}}, "A/n/a"},
		{"deepest not ready", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "A/n/b"), node("A/n/b", "Pending", "False", "A/n/c"), node("A/n/c", "Reconciling", "False", "A/n/d"), node("A/n/d", "Active", "True")}}, "A/n/a A/n/b A/n/c"},
		{"failed beats a longer pending path", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "A/n/b", "A/n/f"), node("A/n/b", "Pending", "False", "A/n/c"), node("A/n/c", "Reconciling", "False"), failed}}, "A/n/a A/n/f"},
		{"missing dependency", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "A/n/m"), {ID: "A/n/m", Missing: true}}}, "A/n/a A/n/m"},
		{"cycle terminates", opsapi.Graph{Root: "A/n/a", Nodes: []opsapi.Node{node("A/n/a", "Pending", "False", "A/n/b"), node("A/n/b", "Pending", "False", "A/n/a")}}, "A/n/a A/n/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, n := range Blame(&tc.g) {
				ids = append(ids, n.ID)
			}
			if got := strings.Join(ids, " "); got != tc.want {
				t.Fatalf("path %s, want %s", got, tc.want)
			}
		})
	}
}

func obj(phase string, gen, observed int64, deleting bool, conds ...map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x", "generation": gen}}}
	var cs []any
	for _, c := range conds {
		cs = append(cs, c)
	}
	o.Object["status"] = map[string]any{"phase": phase, "observedGeneration": observed, "conditions": cs}
	if deleting {
		now := metav1.NewTime(time.Now())
		o.SetDeletionTimestamp(&now)
	}
	return o
}

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": "2026-12-01T00:00:00Z"}
}

func TestJudgeActive(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *unstructured.Unstructured
		want Verdict
	}{
		{"active", obj("Active", 2, 2, false, cond("Ready", "True", "Provisioned", "")), Verdict{Done: true}},
		{"active but status older than spec", obj("Active", 3, 2, false, cond("Ready", "True", "Provisioned", "")), Verdict{Reason: "phase Active (Provisioned)"}},
		{"stalled", obj("Failed", 1, 1, false, cond("Stalled", "True", "SecretConflict", "taken"), cond("Ready", "False", "SecretConflict", "taken")),
			Verdict{Failed: true, Reason: "Stalled: SecretConflict: taken"}},
		{"failed without stalled", obj("Failed", 1, 1, false, cond("Ready", "False", "Boom", "it broke")), Verdict{Failed: true, Reason: "phase Failed (Boom: it broke)"}},
		{"pending on dependencies", obj("Pending", 1, 1, false, cond("Ready", "False", "DependenciesNotActive", "waiting for A/b")),
			Verdict{Reason: "phase Pending (DependenciesNotActive: waiting for A/b)"}},
		{"no status yet", &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}}, Verdict{Reason: "phase Pending"}},
		{"deleting", obj("Active", 1, 1, true, cond("Ready", "True", "Provisioned", "")), Verdict{Failed: true, Reason: "it is being deleted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeActive(tc.o); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFinalizerOwners(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/hold\"":{}}}}`)}},
		{Manager: "other", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}},
	}
	got := FinalizerOwners("Credential", []string{"kubeos.dev/lifecycle", "example.com/hold", "foregroundDeletion", "nobody.example/x"}, managed)
	for f, want := range map[string]string{
		"kubeos.dev/lifecycle": "controller lifecycle-credential",
		"example.com/hold":     "set by field manager kubectl-client-side-apply",
		"foregroundDeletion":   "garbage collector",
		"nobody.example/x":     "unknown",
	} {
		if !strings.Contains(got[f], want) {
			t.Errorf("owner of %s: %q, want it to contain %q", f, got[f], want)
		}
	}
}

func TestUnhealthy(t *testing.T) {
	l := &opsapi.HealthList{Items: []opsapi.KindHealth{{Kind: "A"}, {Kind: "B", Failed: 1, Stalled: 2}}}
	if got := Unhealthy(l); got != "B: 1 failed, 2 stalled" {
		t.Fatalf("Unhealthy = %q", got)
	}
	if got := Unhealthy(&opsapi.HealthList{Items: []opsapi.KindHealth{{Kind: "A", Total: 3}}}); got != "" {
		t.Fatalf("healthy list: %q", got)
	}
}

func TestDot(t *testing.T) {
	g := &opsapi.Graph{Root: "A/n/a", Direction: opsapi.DirectionDependents, Nodes: []opsapi.Node{node("A/n/a", "Active", "True", "A/n/b"), node("A/n/b", "Failed", "False")}}
	d := Dot(g)
	if !strings.Contains(d, `"A/n/b" -> "A/n/a"`) || !strings.Contains(d, "salmon") || !strings.Contains(d, `\nActive`) {
		t.Fatalf("dot:\n%s", d)
	}
}
