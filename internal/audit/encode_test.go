package audit

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// appendEvent must write what encoding/json writes for the same event.
func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC))
	full := &auditv1.Event{
		TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:    auditv1.LevelRequestResponse, AuditID: "a-1", Stage: auditv1.StageResponseComplete,
		RequestURI: "/api/v1/namespaces/x/configmaps?fieldManager=\"q\"", Verb: "create",
		User:                     authnv1.UserInfo{Username: "alice", UID: "u", Groups: []string{"g1", "system:authenticated"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"a", "b"}}},
		ImpersonatedUser:         &authnv1.UserInfo{Username: "bob"},
		SourceIPs:                []string{"127.0.0.1"},
		UserAgent:                "kubectl/v1.33 \u2028 <x>",
		ObjectRef:                &auditv1.ObjectReference{Resource: "configmaps", Namespace: "x", Name: "c", UID: "uid-1", APIVersion: "v1", ResourceVersion: "12"},
		ResponseStatus:           &metav1.Status{Code: 201},
		RequestObject:            &runtime.Unknown{Raw: []byte(`{"kind":"ConfigMap","data":{"a":"b"}}`), ContentType: runtime.ContentTypeJSON},
		ResponseObject:           &runtime.Unknown{Raw: []byte(`{"kind":"ConfigMap"}`)},
		RequestReceivedTimestamp: now, StageTimestamp: now,
		Annotations: map[string]string{"authorization.k8s.io/decision": "allow", "b": "c"},
	}
	failure := &auditv1.Event{
		Level: auditv1.LevelMetadata, Stage: auditv1.StageResponseComplete, Verb: "get",
		ResponseStatus: &metav1.Status{Status: metav1.StatusFailure, Message: "not found", Reason: metav1.StatusReasonNotFound, Code: 404,
			Details: &metav1.StatusDetails{Name: "x", Kind: "configmaps"}},
		RequestReceivedTimestamp: now,
	}
	minimal := &auditv1.Event{Stage: auditv1.StageRequestReceived}
	for name, ev := range map[string]*auditv1.Event{"full": full, "failure": failure, "minimal": minimal} {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEvent(nil, ev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var w, g any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	now := metav1.NewMicroTime(time.Now())
	ev := &auditv1.Event{
		TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:    auditv1.LevelMetadata, AuditID: "8c8c1c6e-1111-2222-3333-444455556666", Stage: auditv1.StageResponseComplete,
		RequestURI: "/api/v1/namespaces/bench/configmaps", Verb: "create",
		User:      authnv1.UserInfo{Username: "bencher", Groups: []string{"system:authenticated"}},
		SourceIPs: []string{"127.0.0.1"}, UserAgent: "apibench/v0.0.0",
		ObjectRef:      &auditv1.ObjectReference{Resource: "configmaps", Namespace: "bench", Name: "cm-00001", UID: "0000-1111", APIVersion: "v1"},
		ResponseStatus: &metav1.Status{Code: 201}, RequestReceivedTimestamp: now, StageTimestamp: now,
		Annotations: map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": "RBAC: allowed"},
	}
	b.Run("appendEvent", func(b *testing.B) {
		for b.Loop() {
			appendEvent(make([]byte, 0, 1024), ev)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(ev)
		}
	})
}
