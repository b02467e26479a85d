package listing

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func names(rows []Row) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Name)
	}
	return strings.Join(s, ",")
}

func TestSelect(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := []Row{
		{Name: "c", Phase: "Active", Ready: "True", Created: t0.Add(2 * time.Minute)},
		{Name: "a", Phase: "Failed", Ready: "False", Reason: "SecretTaken", Message: "secret exists", Created: t0.Add(3 * time.Minute)},
		{Name: "b", Phase: "Active", Ready: "True", Created: t0},
		{Name: "d", Phase: "Pending", Ready: "False", Reason: "DependenciesNotReady", Created: t0.Add(time.Minute)},
	}
	tests := []struct {
		q     Query
		want  string
		total int
	}{
		{Query{}, "a,b,c,d", 4},
		{Query{Sort: "-name"}, "d,c,b,a", 4},
		{Query{Sort: "age"}, "b,d,c,a", 4},
		{Query{Sort: "-age"}, "a,c,d,b", 4},
		{Query{Sort: "phase"}, "b,c,a,d", 4},
		{Query{Sort: "-phase"}, "d,a,b,c", 4}, // ties stay in name order
		{Query{Sort: "ready"}, "a,d,b,c", 4},
		{Query{Phase: "active"}, "b,c", 2},
		{Query{Phase: "Deleting"}, "", 0},
		{Query{Text: "TAKEN"}, "a", 1},
		{Query{Text: "/d"}, "d", 1},
		{Query{Size: 3}, "a,b,c", 4},
		{Query{Size: 3, Page: 1}, "d", 4},
		{Query{Size: 3, Page: 2}, "", 4},
		{Query{Size: 3, Page: -1}, "", 4},
		{Query{Phase: "Active", Sort: "-age", Size: 1}, "c", 2},
	}
	for _, tt := range tests {
		rows := append([]Row(nil), base...)
		got, total := Select(rows, tt.q)
		if names(got) != tt.want || total != tt.total {
			t.Errorf("%+v: got %s (%d), want %s (%d)", tt.q, names(got), total, tt.want, tt.total)
		}
	}
}

func TestValidSort(t *testing.T) {
	for s, want := range map[string]bool{"": true, "name": true, "-age": true, "ready": true, "size": false, "--age": false, "-": false} {
		if got := ValidSort(s); got != want {
			t.Errorf("ValidSort(%q) = %v, want %v", s, got, want)
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
		r, re, m := Summarize(tt.conds)
		if got := r + "/" + re + "/" + m; got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.conds, got, tt.want)
		}
	}
}

func TestNewRow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		deleting bool
		phase    string
		want     string
	}{
		{false, "", "Pending"},
		{false, "Active", "Active"},
		{true, "Active", "Deleting"},
	}
	for _, tt := range tests {
		r := NewRow("ns", "x", t0, tt.deleting, tt.phase, nil)
		if got := fmt.Sprintf("%s/%s %s", r.Namespace, r.Name, r.Phase); got != "ns/x "+tt.want {
			t.Errorf("NewRow(%v, %q): %s, want phase %s", tt.deleting, tt.phase, got, tt.want)
		}
	}
}
