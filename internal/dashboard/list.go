package dashboard

import (
	"cmp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// row is one object of a kind list.
type row struct {
	Namespace, Name string
	Phase           string
	// Ready is the Ready condition's status ("True", "False", "Unknown", "" when absent);
	// Reason and Message are the first abnormal condition's, else Ready's.
	Ready, Reason, Message string
	Conditions             []metav1.Condition
	Created                time.Time
	Deleting               bool
}

// rowOf reads a row from a lifecycle-managed object (status.phase, status.conditions).
func rowOf(o *unstructured.Unstructured) row {
	r := row{Namespace: o.GetNamespace(), Name: o.GetName(), Created: o.GetCreationTimestamp().Time,
		Deleting: o.GetDeletionTimestamp() != nil}
	r.Phase, _, _ = unstructured.NestedString(o.Object, "status", "phase")
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		cond := metav1.Condition{Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"), Message: str("message")}
		if t, err := time.Parse(time.RFC3339, str("lastTransitionTime")); err == nil {
			cond.LastTransitionTime = metav1.NewTime(t)
		}
		r.Conditions = append(r.Conditions, cond)
	}
	return finish(r)
}

// finish fills what rowOf and rowOfMeta derive the same way.
func finish(r row) row {
	r.Ready, r.Reason, r.Message = summarize(r.Conditions)
	switch {
	case r.Deleting:
		r.Phase = "Deleting" // as kube ctl shows it, whatever phase the engine last wrote
	case r.Phase == "":
		r.Phase = "Pending" // the engine has not written one yet (kube ctl's reading too)
	}
	return r
}

// listItem is the part of a lifecycle-managed object a list row needs: decoding only this
// (not spec, not managedFields into maps) makes reading a whole kind several times cheaper.
type listItem struct {
	Metadata struct {
		Name              string       `json:"name"`
		Namespace         string       `json:"namespace"`
		CreationTimestamp metav1.Time  `json:"creationTimestamp"`
		DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase      string             `json:"phase"`
		Conditions []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

// listPage is one page of a list as the API sends it.
type listPage struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []listItem `json:"items"`
}

func rowOfItem(it *listItem) row {
	return finish(row{Namespace: it.Metadata.Namespace, Name: it.Metadata.Name, Created: it.Metadata.CreationTimestamp.Time,
		Deleting: it.Metadata.DeletionTimestamp != nil, Phase: it.Status.Phase, Conditions: it.Status.Conditions})
}

// summarize picks what a list shows of the conditions: Ready's status, and the reason and
// message of the first abnormal one (Stalled or Reconciling True, Ready not True).
func summarize(conds []metav1.Condition) (ready, reason, message string) {
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

// listQuery is what a kind list shows: a filter, an order and a page.
type listQuery struct {
	// Phase keeps objects in this phase ("" all); Text keeps those whose name, reason or
	// message contains it (case-insensitive).
	Phase, Text string
	// Sort is name, age, phase or ready; a leading "-" reverses it.
	Sort string
	// Page counts from 0; Size is the page's length.
	Page, Size int
}

// sortKeys are the orders a list may be asked for.
var sortKeys = []string{"name", "age", "phase", "ready"}

// validSort reports whether s names an order.
func validSort(s string) bool {
	return slices.Contains(sortKeys, strings.TrimPrefix(s, "-"))
}

// simple reports whether the API's own order and paging answer q (name order, no filter):
// then the dashboard pages through the API with continue tokens instead of reading the
// whole kind.
func (q listQuery) simple() bool {
	return q.Phase == "" && q.Text == "" && (q.Sort == "" || q.Sort == "name")
}

// selectRows filters, sorts and pages rows (which it reorders); total is the number that
// passed the filter.
func selectRows(rows []row, q listQuery) (page []row, total int) {
	text := strings.ToLower(q.Text)
	kept := rows[:0]
	for _, r := range rows {
		if q.Phase != "" && !strings.EqualFold(r.Phase, q.Phase) {
			continue
		}
		if text != "" && !strings.Contains(strings.ToLower(r.Namespace+"/"+r.Name+" "+r.Reason+" "+r.Message), text) {
			continue
		}
		kept = append(kept, r)
	}
	key, desc := strings.TrimPrefix(q.Sort, "-"), strings.HasPrefix(q.Sort, "-")
	byName := func(a, b row) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	slices.SortStableFunc(kept, func(a, b row) int {
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
			c = byName(a, b)
			if desc && key == "name" {
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
	if from >= len(kept) {
		return nil, total
	}
	return kept[from:min(from+q.Size, len(kept))], total
}
