package dashboard

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
