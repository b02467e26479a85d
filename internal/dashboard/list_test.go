package dashboard

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func names(rows []row) string {
	s := ""
	for i, r := range rows {
		if i > 0 {
			s += ","
		}
		s += r.Name
	}
	return s
}

func TestSelectRows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := []row{
		{Name: "c", Phase: "Active", Ready: "True", Created: t0.Add(2 * time.Minute)},
		{Name: "a", Phase: "Failed", Ready: "False", Reason: "SecretTaken", Message: "secret exists", Created: t0.Add(3 * time.Minute)},
		{Name: "b", Phase: "Active", Ready: "True", Created: t0},
		{Name: "d", Phase: "Pending", Ready: "False", Reason: "DependenciesNotReady", Created: t0.Add(time.Minute)},
	}
	tests := []struct {
		q     listQuery
		want  string
		total int
	}{
		{listQuery{}, "a,b,c,d", 4},
		{listQuery{Sort: "-name"}, "d,c,b,a", 4},
		{listQuery{Sort: "age"}, "b,d,c,a", 4},
		{listQuery{Sort: "-age"}, "a,c,d,b", 4},
		{listQuery{Sort: "phase"}, "b,c,a,d", 4},
		{listQuery{Phase: "active"}, "b,c", 2},
		{listQuery{Text: "TAKEN"}, "a", 1},
		{listQuery{Size: 3}, "a,b,c", 4},
		{listQuery{Size: 3, Page: 1}, "d", 4},
		{listQuery{Size: 3, Page: 2}, "", 4},
		{listQuery{Phase: "Active", Sort: "-age", Size: 1}, "c", 2},
	}
	for _, tt := range tests {
		rows := append([]row(nil), base...)
		got, total := selectRows(rows, tt.q)
		if names(got) != tt.want || total != tt.total {
			t.Errorf("%+v: got %s (%d), want %s (%d)", tt.q, names(got), total, tt.want, tt.total)
		}
	}
}

func TestSummarize(t *testing.T) {
	c := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	tests := []struct {
		conds []metav1.Condition
		want  string
	}{
		{nil, "//"},
		{[]metav1.Condition{c("Ready", "True", "Provisioned")}, "True/Provisioned/"},
		{[]metav1.Condition{c("Ready", "False", "DependenciesNotReady"), c("Reconciling", "True", "Waiting")}, "False/Waiting/"},
		{[]metav1.Condition{c("Reconciling", "True", "Waiting"), c("Stalled", "True", "Conflict"), c("Ready", "False", "X")}, "False/Conflict/"},
	}
	for _, tt := range tests {
		r, re, m := summarize(tt.conds)
		if got := r + "/" + re + "/" + m; got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.conds, got, tt.want)
		}
	}
}

func TestRowOfItem(t *testing.T) {
	var p listPage
	raw := `{"metadata":{"continue":"c1"},"items":[{"metadata":{"name":"a","namespace":"ns","creationTimestamp":"2026-01-01T00:00:00Z","managedFields":[{"manager":"x"}]},
	  "spec":{"type":"password"},"status":{"phase":"Failed","conditions":[{"type":"Stalled","status":"True","reason":"SecretConflict","message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"Ready","status":"False","reason":"SecretConflict","lastTransitionTime":"2026-01-01T00:00:00Z"}]}},
	  {"metadata":{"name":"b","namespace":"ns","creationTimestamp":"2026-01-01T00:00:00Z"}}]}`
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	a, b := rowOfItem(&p.Items[0]), rowOfItem(&p.Items[1])
	if p.Metadata.Continue != "c1" || a.Phase != "Failed" || a.Ready != "False" || a.Reason != "SecretConflict" || a.Message != "m" || b.Phase != "Pending" || b.Ready != "" {
		t.Errorf("rowOfItem: %+v %+v (continue %q)", a, b, p.Metadata.Continue)
	}
}

func TestRowOf(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "Deprovisioning", "lastTransitionTime": "2026-01-01T00:00:00Z"}}},
	}}
	r := rowOf(o)
	if got := fmt.Sprintf("%s/%s %s %s %s %v %d", r.Namespace, r.Name, r.Phase, r.Ready, r.Reason, r.Deleting, len(r.Conditions)); got != "ns/x Deleting False Deprovisioning true 1" {
		t.Errorf("rowOf: %s", got)
	}
}
