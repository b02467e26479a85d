package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// managers lists "manager/operation[/subresource]" of obj's managedFields.
func managers(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		s := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			s += "/" + e.Subresource
		}
		out = append(out, s)
	}
	return out
}

// TestServerSideApply: writes record their managers in metadata.managedFields, and
// server-side apply merges by owner — a field another manager owns is a 409 conflict naming
// it unless forced, and a field the applier stops applying goes away — as kube-apiserver does.
func TestServerSideApply(t *testing.T) {
	apiSuite.Need(t)
	cs := kubernetes.NewForConfigOrDie(adminConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cms := cs.CoreV1().ConfigMaps("default")

	// A create records its manager (the fieldManager parameter) as an Update.
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ssa-created"}, Data: map[string]string{"k": "v"}},
		metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(managers(created), ","); got != "creator/Update" {
		t.Fatalf("managedFields after create: %q, want creator/Update", got)
	}

	// Apply creates; the applier owns what it applied.
	cm, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", "default").WithLabels(map[string]string{"team": "a"}).
		WithData(map[string]string{"x": "1", "y": "2"}), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(managers(cm), ","); got != "alice/Apply" {
		t.Fatalf("managedFields after the first apply: %q, want alice/Apply", got)
	}

	// Another applier changing alice's field conflicts, and nothing changes.
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("ssa", "default").WithData(map[string]string{"x": "9"}), metav1.ApplyOptions{FieldManager: "bob"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "alice": .data.x`) {
		t.Fatalf("conflicting apply: want 409 naming alice and .data.x, got %v", err)
	}
	if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Details == nil || len(se.Status().Details.Causes) != 1 || se.Status().Details.Causes[0].Field != ".data.x" {
		t.Fatalf("conflict causes: %+v", err)
	}
	// Agreeing on the value is no conflict (the field is then shared); forcing takes it.
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", "default").WithData(map[string]string{"y": "2"}), metav1.ApplyOptions{FieldManager: "bob"}); err != nil {
		t.Fatalf("apply of the same value: %v", err)
	}
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("ssa", "default").WithData(map[string]string{"x": "9", "y": "2"}), metav1.ApplyOptions{FieldManager: "bob", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if cm.Data["x"] != "9" {
		t.Fatalf("data.x = %q after the forced apply, want 9", cm.Data["x"])
	}

	// alice stops applying her label: it goes. y stays (bob applies it too).
	cm, err = cms.Apply(ctx, corev1ac.ConfigMap("ssa", "default"), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Labels["team"]; ok || cm.Data["y"] != "2" || cm.Data["x"] != "9" {
		t.Fatalf("after alice applied nothing: labels %v data %v, want no team label and x=9,y=2", cm.Labels, cm.Data)
	}

	// An update by another manager makes it an owner: changing its field by apply conflicts.
	cm.Data["z"] = "3"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "carol"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(managers(cm), ","); !strings.Contains(got, "carol/Update") {
		t.Fatalf("managedFields after carol's update: %q", got)
	}
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", "default").WithData(map[string]string{"z": "4"}), metav1.ApplyOptions{FieldManager: "alice"}); !apierrors.IsConflict(err) {
		t.Fatalf("apply over carol's field: want 409, got %v", err)
	}

	// Bad input: managedFields in an applied object, a fieldManager too long.
	r := do(t, admin, http.MethodPatch, "/api/v1/namespaces/default/configmaps/ssa?fieldManager=alice", "application/apply-patch+yaml",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa","managedFields":[{"manager":"x","operation":"Apply"}]}}`))
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), "metadata.managedFields must be nil") {
		t.Fatalf("apply with managedFields: %d %s", r.code, r.body)
	}
	r = do(t, admin, http.MethodPatch, "/api/v1/namespaces/default/configmaps/ssa?fieldManager="+strings.Repeat("m", 129), "application/apply-patch+yaml",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"}}`))
	if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "fieldManager") {
		t.Fatalf("apply with a fieldManager of 129 characters: %d %s", r.code, r.body)
	}
	// The object is as it was.
	got, err := cms.Get(ctx, "ssa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["x"] != "9" || got.Data["z"] != "3" || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("after refused applies: data %v rv %s (was %s)", got.Data, got.ResourceVersion, cm.ResourceVersion)
	}
}

// TestUnknownFieldsDropped: fields a built-in kind's Go type does not have are dropped from
// what is stored, as kube-apiserver's decoder drops them, whatever fieldValidation says
// about them (Warn, the default, warns) — on create, patch and apply — and the field manager
// still records the writer.
func TestUnknownFieldsDropped(t *testing.T) {
	apiSuite.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(adminConfig(t))
	base := "/api/v1/namespaces/default/configmaps"
	r := do(t, admin, http.MethodPost, base+"?fieldManager=writer", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unknown-fields"},"bogus":1,"data":{"a":"b","a":"c"}}`))
	if r.code != http.StatusCreated || !strings.Contains(r.header.Get("Warning"), `unknown field \"bogus\"`) {
		t.Fatalf("create with an unknown field: %d, Warning %q", r.code, r.header.Get("Warning"))
	}
	check := func(when string) {
		t.Helper()
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath(base, "unknown-fields").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "bogus") || strings.Contains(string(raw), "extra") {
			t.Fatalf("%s: an unknown field was stored: %s", when, raw)
		}
	}
	check("after create")
	// A body without apiVersion and kind (the URL names them) loses its unknown fields too,
	// and is stored with both.
	r = do(t, admin, http.MethodPost, base, "application/json", []byte(`{"metadata":{"name":"unknown-fields-2"},"bogus":1}`))
	if r.code != http.StatusCreated {
		t.Fatalf("create without apiVersion and kind: %d %s", r.code, r.body)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(base, "unknown-fields-2").DoRaw(ctx)
	if err != nil || strings.Contains(string(raw), "bogus") || !strings.Contains(string(raw), `"kind":"ConfigMap"`) || !strings.Contains(string(raw), `"apiVersion":"v1"`) {
		t.Fatalf("stored without apiVersion and kind in the body: %s %v", raw, err)
	}
	cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "unknown-fields", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["a"] != "c" || strings.Join(managers(cm), ",") != "writer/Update" {
		t.Fatalf("after create: data %v, managedFields %v (want the last duplicate and writer/Update)", cm.Data, managers(cm))
	}
	r = do(t, admin, http.MethodPatch, base+"/unknown-fields", "application/merge-patch+json", []byte(`{"extra":{"x":1},"data":{"p":"q"}}`))
	if r.code != http.StatusOK {
		t.Fatalf("merge patch with an unknown field: %d %s", r.code, r.body)
	}
	check("after a merge patch")
	r = do(t, admin, http.MethodPatch, base+"/unknown-fields?fieldManager=applier", "application/apply-patch+yaml",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unknown-fields"},"bogus":true,"data":{"z":"1"}}`))
	if r.code != http.StatusOK {
		t.Fatalf("apply with an unknown field: %d %s", r.code, r.body)
	}
	check("after an apply")
	if cm, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "unknown-fields", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if cm.Data["z"] != "1" || !strings.Contains(strings.Join(managers(cm), ","), "applier/Apply") {
		t.Fatalf("after the apply: data %v, managedFields %v", cm.Data, managers(cm))
	}
}
