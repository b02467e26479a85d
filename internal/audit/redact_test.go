package audit

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

func TestRedactSecrets(t *testing.T) {
	for name, body := range map[string]string{
		"secret":      `{"kind":"Secret","metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"c2VjcmV0LXB3\"}}"}},"data":{"password":"c2VjcmV0LXB3"},"stringData":{"x":"secret-pw"}}`,
		"list":        `{"kind":"SecretList","items":[{"data":{"password":"c2VjcmV0LXB3"}}]}`,
		"merge patch": `{"data":{"password":"c2VjcmV0LXB3"}}`,
		"json patch":  `[{"op":"replace","path":"/data/password","value":"c2VjcmV0LXB3"}]`,
		"not json":    `password: secret-pw`,
	} {
		ev := &auditv1.Event{ObjectRef: &auditv1.ObjectReference{Resource: "secrets"},
			RequestObject: &runtime.Unknown{Raw: []byte(body), ContentType: runtime.ContentTypeJSON}}
		redactSecrets(ev)
		if ev.RequestObject != nil && (strings.Contains(string(ev.RequestObject.Raw), "c2VjcmV0LXB3") || strings.Contains(string(ev.RequestObject.Raw), "secret-pw")) {
			t.Errorf("%s: not redacted: %s", name, ev.RequestObject.Raw)
		}
	}
	cm := &auditv1.Event{ObjectRef: &auditv1.ObjectReference{Resource: "configmaps"},
		RequestObject: &runtime.Unknown{Raw: []byte(`{"data":{"k":"v"}}`), ContentType: runtime.ContentTypeJSON}}
	redactSecrets(cm)
	if string(cm.RequestObject.Raw) != `{"data":{"k":"v"}}` {
		t.Errorf("a ConfigMap was redacted: %s", cm.RequestObject.Raw)
	}
}
