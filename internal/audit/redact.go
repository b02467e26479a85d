package audit

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Redacted replaces secret values in the log.
const Redacted = "<redacted>"

// lastApplied is kubectl's annotation holding a copy of the applied object (a Secret's data
// with it).
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// redactSecrets blanks the values of Secrets in an event's request and response objects
// (Request and RequestResponse levels): data and stringData of a Secret or of a list's
// items, kubectl's last-applied copy, the values of a JSON patch. Bodies that are not JSON
// are dropped.
func redactSecrets(ev *auditv1.Event) {
	if ev.ObjectRef == nil || ev.ObjectRef.APIGroup != "" || ev.ObjectRef.Resource != "secrets" {
		return
	}
	ev.RequestObject = redactUnknown(ev.RequestObject)
	ev.ResponseObject = redactUnknown(ev.ResponseObject)
}

func redactUnknown(u *runtime.Unknown) *runtime.Unknown {
	if u == nil {
		return nil
	}
	if u.ContentType != "" && u.ContentType != runtime.ContentTypeJSON {
		return nil
	}
	var v any
	if err := json.Unmarshal(u.Raw, &v); err != nil {
		return nil
	}
	redactValue(v)
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}

func redactValue(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"data", "stringData"} {
			if m, ok := v[k].(map[string]any); ok {
				for key := range m {
					m[key] = Redacted
				}
			}
		}
		if md, ok := v["metadata"].(map[string]any); ok {
			if a, ok := md["annotations"].(map[string]any); ok {
				if _, ok := a[lastApplied]; ok {
					a[lastApplied] = Redacted
				}
			}
		}
		if items, ok := v["items"].([]any); ok {
			for _, it := range items {
				redactValue(it)
			}
		}
	case []any: // a JSON patch
		for _, op := range v {
			if m, ok := op.(map[string]any); ok {
				if _, ok := m["value"]; ok {
					m["value"] = Redacted
				}
			}
		}
	}
}
