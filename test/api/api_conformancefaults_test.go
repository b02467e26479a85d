package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// Faults upstream's sig-api-machinery conformance suite found, one regression test each.

// A merge patch of namespaces/status keeps (and writes) metadata, as kube-apiserver's
// namespace status strategy resets only spec ("should apply changes to a namespace status").
func TestNamespaceStatusPatchWritesMetadata(t *testing.T) {
	apiSuite.Need(t)
	mustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"ns-status-patch","annotations":{"keep":"me"}}}`, 201)
	r := mustDo(t, "PATCH", "/api/v1/namespaces/ns-status-patch/status", "application/merge-patch+json",
		`{"metadata":{"annotations":{"e2e-patched-ns-status":"ns-status-patch"}},"status":{"conditions":[{"type":"StatusPatch","status":"True","reason":"E2E","message":"Patched by an e2e test"}]}}`, 200)
	var ns struct {
		Metadata struct{ Annotations map[string]string }
		Status   struct{ Conditions []struct{ Type string } }
	}
	if err := json.Unmarshal(r.body, &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Metadata.Annotations["e2e-patched-ns-status"] != "ns-status-patch" || ns.Metadata.Annotations["keep"] != "me" {
		t.Errorf("annotations after the status patch: %v", ns.Metadata.Annotations)
	}
	if len(ns.Status.Conditions) != 1 || ns.Status.Conditions[0].Type != "StatusPatch" {
		t.Errorf("conditions after the status patch: %+v", ns.Status.Conditions)
	}
	// The spec is still not the status subresource's to change.
	r = mustDo(t, "PATCH", "/api/v1/namespaces/ns-status-patch/status", "application/merge-patch+json", `{"spec":{"finalizers":[]}}`, 200)
	if !strings.Contains(string(r.body), `"finalizers":["kubernetes"]`) {
		t.Errorf("a status patch changed spec.finalizers: %s", r.body)
	}
}

// A pods/status patch writes annotations too: upstream's pod status strategy resets only
// spec, deletionTimestamp and ownerReferences.
func TestPodStatusPatchWritesAnnotations(t *testing.T) {
	apiSuite.Need(t)
	mustDo(t, "POST", "/api/v1/namespaces/default/pods", "application/json",
		`{"metadata":{"name":"status-annotations"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, 201)
	r := mustDo(t, "PATCH", "/api/v1/namespaces/default/pods/status-annotations/status", "application/merge-patch+json",
		`{"metadata":{"annotations":{"patched":"yes"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"u"}]},"status":{"message":"hello"}}`, 200)
	var pod struct {
		Metadata struct {
			Annotations     map[string]string
			OwnerReferences []any
		}
		Status struct{ Message string }
	}
	if err := json.Unmarshal(r.body, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Metadata.Annotations["patched"] != "yes" || pod.Status.Message != "hello" {
		t.Errorf("pod after the status patch: %+v", pod)
	}
	if len(pod.Metadata.OwnerReferences) != 0 {
		t.Errorf("pods/status changed ownerReferences: %v", pod.Metadata.OwnerReferences)
	}
}

// Asking for a Table from a kind with no Table support (POST selfsubjectaccessreviews) is
// 406 NotAcceptable with kube-apiserver's message, not 201.
func TestTableOfComputedKindNotAcceptable(t *testing.T) {
	apiSuite.Need(t)
	body := []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}}`)
	r := do(t, admin, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json", body,
		"Accept: application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 406 {
		t.Fatalf("code %d, want 406: %s", r.code, r.body)
	}
	st := decodeStatus(t, r)
	if st.Reason != "NotAcceptable" || st.Message != "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf" {
		t.Errorf("status %+v", st)
	}
	// With a fallback to JSON it is answered.
	r = do(t, admin, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json", body,
		"Accept: application/json;as=Table;v=v1;g=meta.k8s.io, application/json")
	if r.code != 201 {
		t.Fatalf("with a JSON fallback: code %d: %s", r.code, r.body)
	}
}
