package audit

import (
	"encoding/json"
	"strconv"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kubeos.dev/kube/internal/jsonenc"
)

// appendEvent writes ev as one JSON object, field for field what encoding/json writes for
// auditv1.Event, without reflection for the parts every event has (two events are written
// per request). Rare or open-ended parts (status details, non-JSON objects, authentication
// metadata) go through encoding/json.
func appendEvent(b []byte, ev *auditv1.Event) ([]byte, error) {
	b = append(b, '{')
	b = field(b, "kind", ev.Kind, false)
	b = field(b, "apiVersion", ev.APIVersion, false)
	b = field(b, "level", string(ev.Level), true)
	b = field(b, "auditID", string(ev.AuditID), true)
	b = field(b, "stage", string(ev.Stage), true)
	b = field(b, "requestURI", ev.RequestURI, true)
	b = field(b, "verb", ev.Verb, true)
	b = append(b, `,"user":`...)
	b = appendUser(b, &ev.User)
	if ev.ImpersonatedUser != nil {
		b = append(b, `,"impersonatedUser":`...)
		b = appendUser(b, ev.ImpersonatedUser)
	}
	var err error
	if ev.AuthenticationMetadata != nil {
		if b, err = marshalField(b, "authenticationMetadata", ev.AuthenticationMetadata); err != nil {
			return nil, err
		}
	}
	if len(ev.SourceIPs) > 0 {
		b = append(b, `,"sourceIPs":`...)
		b = appendStrings(b, ev.SourceIPs)
	}
	b = field(b, "userAgent", ev.UserAgent, false)
	if r := ev.ObjectRef; r != nil {
		b = append(b, `,"objectRef":{`...)
		start := len(b)
		b = field(b, "resource", r.Resource, false)
		b = field(b, "namespace", r.Namespace, false)
		b = field(b, "name", r.Name, false)
		b = field(b, "uid", string(r.UID), false)
		b = field(b, "apiGroup", r.APIGroup, false)
		b = field(b, "apiVersion", r.APIVersion, false)
		b = field(b, "resourceVersion", r.ResourceVersion, false)
		b = field(b, "subresource", r.Subresource, false)
		if len(b) > start && b[start] == ',' {
			b = append(b[:start], b[start+1:]...)
		}
		b = append(b, '}')
	}
	if st := ev.ResponseStatus; st != nil {
		if b, err = appendStatus(b, st); err != nil {
			return nil, err
		}
	}
	if b, err = appendUnknown(b, "requestObject", ev.RequestObject); err != nil {
		return nil, err
	}
	if b, err = appendUnknown(b, "responseObject", ev.ResponseObject); err != nil {
		return nil, err
	}
	b = append(b, `,"requestReceivedTimestamp":`...)
	b = appendMicroTime(b, ev.RequestReceivedTimestamp)
	b = append(b, `,"stageTimestamp":`...)
	b = appendMicroTime(b, ev.StageTimestamp)
	if len(ev.Annotations) > 0 {
		m := make(map[string]any, len(ev.Annotations))
		for k, v := range ev.Annotations {
			m[k] = v
		}
		b = append(b, `,"annotations":`...)
		if b, err = jsonenc.AppendValue(b, m); err != nil {
			return nil, err
		}
	}
	if len(b) > 1 && b[1] == ',' {
		b = append(b[:1], b[2:]...)
	}
	return append(b, '}'), nil
}

// field appends ,"name":"value" — always, or only when value is set.
func field(b []byte, name, value string, always bool) []byte {
	if value == "" && !always {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return jsonenc.AppendString(b, value)
}

func marshalField(b []byte, name string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return append(b, data...), nil
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, s)
	}
	return append(b, ']')
}

func appendUser(b []byte, u *authnv1.UserInfo) []byte {
	b = append(b, '{')
	start := len(b)
	b = field(b, "username", u.Username, false)
	b = field(b, "uid", u.UID, false)
	if len(u.Groups) > 0 {
		b = append(b, `,"groups":`...)
		b = appendStrings(b, u.Groups)
	}
	if len(u.Extra) > 0 {
		m := make(map[string]any, len(u.Extra))
		for k, vs := range u.Extra {
			l := make([]any, len(vs))
			for i, v := range vs {
				l[i] = v
			}
			m[k] = l
		}
		b = append(b, `,"extra":`...)
		b, _ = jsonenc.AppendValue(b, m)
	}
	if len(b) > start && b[start] == ',' {
		b = append(b[:start], b[start+1:]...)
	}
	return append(b, '}')
}

// appendStatus writes the common Status shapes by hand (success: metadata and code) and the
// rest through encoding/json.
func appendStatus(b []byte, st *metav1.Status) ([]byte, error) {
	if st.Details != nil || st.ListMeta.ResourceVersion != "" || st.ListMeta.Continue != "" || st.ListMeta.RemainingItemCount != nil || st.Kind != "" || st.APIVersion != "" {
		return marshalField(b, "responseStatus", st)
	}
	b = append(b, `,"responseStatus":{"metadata":{}`...)
	b = field(b, "status", st.Status, false)
	b = field(b, "message", st.Message, false)
	b = field(b, "reason", string(st.Reason), false)
	if st.Code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(st.Code), 10)
	}
	return append(b, '}'), nil
}

func appendUnknown(b []byte, name string, u *runtime.Unknown) ([]byte, error) {
	if u == nil {
		return b, nil
	}
	if (u.ContentType == "" || u.ContentType == runtime.ContentTypeJSON) && json.Valid(u.Raw) {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		return append(b, u.Raw...), nil
	}
	return marshalField(b, name, u)
}

func appendMicroTime(b []byte, t metav1.MicroTime) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, metav1.RFC3339Micro)
	return append(b, '"')
}
