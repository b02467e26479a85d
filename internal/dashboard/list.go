package dashboard

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/ctl/listing"
	"kubeos.dev/kube/internal/ctl/opsapi"
)

// row is one object of a kind list (internal/ctl/listing decides what it shows).
type row = listing.Row

// listQuery is what a kind list shows: a filter, an order and a page.
type listQuery = listing.Query

// rowOf reads a row from a lifecycle-managed object (status.phase, status.conditions).
func rowOf(o *unstructured.Unstructured) row {
	phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
	var conds []metav1.Condition
	raw, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range raw {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		cond := metav1.Condition{Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"), Message: str("message")}
		if t, err := time.Parse(time.RFC3339, str("lastTransitionTime")); err == nil {
			cond.LastTransitionTime = metav1.NewTime(t)
		}
		conds = append(conds, cond)
	}
	return listing.NewRow(o.GetNamespace(), o.GetName(), o.GetCreationTimestamp().Time, o.GetDeletionTimestamp() != nil, phase, conds)
}

// listItem is the part of a lifecycle-managed object a list row needs: decoding only this
// (not spec, not managedFields into maps) keeps an API page cheap.
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
	return listing.NewRow(it.Metadata.Namespace, it.Metadata.Name, it.Metadata.CreationTimestamp.Time, it.Metadata.DeletionTimestamp != nil,
		it.Status.Phase, it.Status.Conditions)
}

// rowOfObject is a row of the ops API's objects page.
func rowOfObject(o *opsapi.ObjectRow) row {
	return row{Namespace: o.Namespace, Name: o.Name, Phase: o.Phase, Ready: o.Ready, Reason: o.Reason, Message: o.Message,
		Conditions: o.Conditions, Created: o.CreationTimestamp.Time, Deleting: o.Deleting}
}
