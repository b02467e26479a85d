// Package listing decides what one page of a lifecycle-managed kind's list shows: the row an
// object makes (its phase as kube ctl reads it, Ready, the first abnormal condition), a filter
// (phase, text), an order (name, age, phase, ready) and a page. It is pure: the ops API's
// objects resource (internal/server/ops.go) runs it over the server's informer copies of a
// kind, so a filtered or sorted page costs the server one pass over the kind in memory and
// the client one page; the dashboard (internal/dashboard) reads rows the same way from an
// API page.
package listing

import (
	"cmp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Row is one object of a kind list.
type Row struct {
	Namespace, Name string
	// Phase is status.phase, Pending when never written, Deleting once the object has a
	// deletionTimestamp (whatever phase the engine last wrote), as kube ctl shows it.
	Phase string
	// Ready is the Ready condition's status ("True", "False", "Unknown", "" when absent);
	// Reason and Message are the first abnormal condition's (Stalled or Reconciling True),
	// else Ready's.
	Ready, Reason, Message string
	Conditions             []metav1.Condition
	Created                time.Time
	Deleting               bool
}

// NewRow builds the row of an object from its metadata and lifecycle status.
func NewRow(namespace, name string, created time.Time, deleting bool, phase string, conds []metav1.Condition) Row {
	r := Row{Namespace: namespace, Name: name, Created: created, Deleting: deleting, Phase: phase, Conditions: conds}
	r.Ready, r.Reason, r.Message = Summarize(conds)
	switch {
	case r.Deleting:
		r.Phase = "Deleting"
	case r.Phase == "":
		r.Phase = "Pending" // the engine has not written one yet
	}
	return r
}

// Summarize picks what a list shows of the conditions: Ready's status, and the reason and
// message of the first abnormal one (Stalled or Reconciling True), else Ready's.
func Summarize(conds []metav1.Condition) (ready, reason, message string) {
	var readyC *metav1.Condition
	for i := range conds {
		if conds[i].Type == "Ready" {
			readyC = &conds[i]
		}
	}
	for _, t := range []string{"Stalled", "Reconciling"} {
		for _, c := range conds {
			if c.Type == t && c.Status == metav1.ConditionTrue {
				if readyC != nil {
					ready = string(readyC.Status)
				}
				return ready, c.Reason, c.Message
			}
		}
	}
	if readyC == nil {
		return "", "", ""
	}
	return string(readyC.Status), readyC.Reason, readyC.Message
}

// Query is what a kind list shows: a filter, an order and a page.
type Query struct {
	// Phase keeps objects in this phase ("" all, case-insensitive); Text keeps those whose
	// namespace/name, reason or message contains it (case-insensitive).
	Phase, Text string
	// Sort is name, age, phase or ready ("" is name); a leading "-" reverses it. Ties are
	// broken by namespace and name.
	Sort string
	// Page counts from 0; Size is the page's length (0: everything that matched).
	Page, Size int
}

// SortKeys are the orders a list may be asked for.
var SortKeys = []string{"name", "age", "phase", "ready"}

// ValidSort reports whether s names an order ("" does: name).
func ValidSort(s string) bool {
	return s == "" || slices.Contains(SortKeys, strings.TrimPrefix(s, "-"))
}

// Simple reports whether the API's own order and paging answer q (name order, no filter).
func (q Query) Simple() bool {
	return q.Phase == "" && q.Text == "" && (q.Sort == "" || q.Sort == "name")
}

// Match reports whether r passes q's filter.
func (q Query) Match(r *Row) bool {
	if q.Phase != "" && !strings.EqualFold(r.Phase, q.Phase) {
		return false
	}
	if q.Text == "" {
		return true
	}
	text := strings.ToLower(q.Text)
	return strings.Contains(strings.ToLower(r.Namespace+"/"+r.Name+" "+r.Reason+" "+r.Message), text)
}

// Select filters, sorts and pages rows (which it reorders in place); total is the number
// that passed the filter.
func Select(rows []Row, q Query) (page []Row, total int) {
	kept := rows[:0]
	for i := range rows {
		if q.Match(&rows[i]) {
			kept = append(kept, rows[i])
		}
	}
	key, desc := strings.TrimPrefix(q.Sort, "-"), strings.HasPrefix(q.Sort, "-")
	slices.SortFunc(kept, func(a, b Row) int {
		var c int
		switch key {
		case "age": // oldest first
			c = a.Created.Compare(b.Created)
		case "phase":
			c = cmp.Compare(a.Phase, b.Phase)
		case "ready":
			c = cmp.Compare(a.Ready, b.Ready)
		}
		if desc {
			c = -c
		}
		if c == 0 {
			c = cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			if desc && (key == "name" || key == "") {
				c = -c
			}
		}
		return c
	})
	total = len(kept)
	if q.Size <= 0 {
		return kept, total
	}
	from := q.Page * q.Size
	if from >= len(kept) || from < 0 {
		return nil, total
	}
	return kept[from:min(from+q.Size, len(kept))], total
}
