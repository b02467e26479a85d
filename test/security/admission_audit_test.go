package security

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditEvents reads the audit log's JSON lines.
func auditEvents(t *testing.T) []auditv1.Event {
	t.Helper()
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// eventsFor are the audit events (every stage) of the requests of one verb on one object.
// A create's RequestReceived event has no name yet (as upstream): requests are matched by
// their later events and then gathered by auditID.
func eventsFor(evs []auditv1.Event, verb, resource, ns, name string) []auditv1.Event {
	ids := map[string]bool{}
	for _, ev := range evs {
		if ev.Verb == verb && ev.ObjectRef != nil && ev.ObjectRef.Resource == resource && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name {
			ids[string(ev.AuditID)] = true
		}
	}
	var out []auditv1.Event
	for _, ev := range evs {
		if ids[string(ev.AuditID)] {
			out = append(out, ev)
		}
	}
	return out
}

// TestAuditLevels: the log holds the requests at the levels the policy sets, with the
// object's UID, the request and response bodies only where the level asks for them.
func TestAuditLevels(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	testNamespace(t, "audit-rr")
	testNamespace(t, "audit-md")
	rr, err := createCM("audit-rr", "full")
	if err != nil {
		t.Fatal(err)
	}
	md, err := cs.CoreV1().Secrets("audit-md").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "meta"}, StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A server-side apply (a YAML body) logs its applied configuration as the request.
	applied := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"full"},"data":{"applied":"yes"}}`
	if _, err := cs.CoreV1().ConfigMaps("audit-rr").Patch(ctx, "full", "application/apply-patch+yaml", []byte(applied), metav1.PatchOptions{FieldManager: "auditor"}); err != nil {
		t.Fatal(err)
	}
	// A watch logs ResponseStarted when its response begins.
	w, err := cs.CoreV1().ConfigMaps("audit-rr").Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr(int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	for range w.ResultChan() {
	}
	if _, err := cs.CoreV1().ConfigMaps("audit-md").Get(ctx, "missing", metav1.GetOptions{}); err == nil {
		t.Fatal("get of a missing configmap succeeded")
	}

	var evs []auditv1.Event
	admissionEventually(t, "audit events written", func() error {
		evs = auditEvents(t)
		if len(eventsFor(evs, "watch", "configmaps", "audit-rr", "")) < 3 {
			return errString("the watch's events are not all written yet")
		}
		return nil
	})
	check := func(name string, got []auditv1.Event, level auditv1.Level, uid string, reqObj, respObj bool) {
		t.Helper()
		stages := map[auditv1.Stage]bool{}
		for _, ev := range got {
			stages[ev.Stage] = true
			if ev.Level != level {
				t.Errorf("%s %s: level %s, want %s", name, ev.Stage, ev.Level, level)
			}
			if ev.Stage != auditv1.StageResponseComplete {
				continue
			}
			if uid != "" && string(ev.ObjectRef.UID) != uid {
				t.Errorf("%s: objectRef.uid %q, want %q", name, ev.ObjectRef.UID, uid)
			}
			if (ev.RequestObject != nil) != reqObj || (ev.ResponseObject != nil) != respObj {
				t.Errorf("%s: requestObject %v responseObject %v, want %v %v", name, ev.RequestObject != nil, ev.ResponseObject != nil, reqObj, respObj)
			}
			if ev.User.Username == "" || ev.AuditID == "" || ev.ResponseStatus == nil {
				t.Errorf("%s: incomplete event %+v", name, ev)
			}
		}
		if !stages[auditv1.StageRequestReceived] || !stages[auditv1.StageResponseComplete] {
			t.Errorf("%s: stages %v", name, stages)
		}
	}
	check("create configmap audit-rr/full", eventsFor(evs, "create", "configmaps", "audit-rr", "full"), auditv1.LevelRequestResponse, string(rr.UID), true, true)
	check("create secret audit-md/meta", eventsFor(evs, "create", "secrets", "audit-md", "meta"), auditv1.LevelMetadata, string(md.UID), false, false)
	check("apply configmap audit-rr/full", eventsFor(evs, "patch", "configmaps", "audit-rr", "full"), auditv1.LevelRequestResponse, string(rr.UID), true, true)
	for _, ev := range eventsFor(evs, "patch", "configmaps", "audit-rr", "full") {
		if ev.Stage == auditv1.StageResponseComplete && (ev.RequestObject == nil || !strings.Contains(string(ev.RequestObject.Raw), `"applied":"yes"`)) {
			t.Errorf("apply's requestObject: %v", ev.RequestObject)
		}
	}
	watch := eventsFor(evs, "watch", "configmaps", "audit-rr", "")
	started := false
	for _, ev := range watch {
		started = started || ev.Stage == auditv1.StageResponseStarted
	}
	if !started {
		t.Errorf("watch without ResponseStarted: %d events", len(watch))
	}
	for _, ev := range eventsFor(evs, "get", "configmaps", "audit-md", "missing") {
		if ev.Stage == auditv1.StageResponseComplete && (ev.ResponseStatus.Code != 404 || ev.ResponseStatus.Reason != metav1.StatusReasonNotFound) {
			t.Errorf("missing get: %+v", ev.ResponseStatus)
		}
	}
	// The secret's value is in no event (Metadata level).
	data, _ := os.ReadFile(auditPath)
	if containsAny(string(data), "hunter2", "aHVudGVyMg==") {
		t.Error("the audit log holds the secret's value")
	}
}

// checkWebhookAudit: the requests of TestWebhooksWithKubectl are logged at Request level
// (configmaps in wh-kubectl); the refusal carries its code, the mutated object its
// webhook's audit annotation and its UID.
func checkWebhookAudit(t *testing.T) {
	t.Helper()
	admissionEventually(t, "webhook requests in the audit log", func() error {
		var sawDenied, sawMutated bool
		for _, ev := range auditEvents(t) {
			// Only the test's configmaps: the namespace's default ServiceAccount and
			// kube-root-ca.crt are created by controllers.
			if ev.ObjectRef == nil || ev.ObjectRef.Namespace != "wh-kubectl" || ev.Verb != "create" || ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef.Resource != "configmaps" || ev.ObjectRef.Name == "kube-root-ca.crt" {
				continue
			}
			if ev.Level != auditv1.LevelRequest || ev.RequestObject == nil || ev.ResponseObject != nil {
				t.Errorf("wh-kubectl create %s: level %s request %v response %v", ev.ObjectRef.Name, ev.Level, ev.RequestObject != nil, ev.ResponseObject != nil)
			}
			if ev.ObjectRef.Name == "forbidden-name" && ev.ResponseStatus.Code == 403 && strings.Contains(ev.ResponseStatus.Message, "denied the request") {
				sawDenied = true
			}
			if ev.ObjectRef.Name == "allowed" && ev.ObjectRef.UID != "" && ev.Annotations["label.kube.test/mutated"] == "true" {
				sawMutated = true
			}
		}
		if !sawDenied || !sawMutated {
			return fmt.Errorf("denied %v, mutated %v", sawDenied, sawMutated)
		}
		return nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
