package request

import (
	"context"
	"sync"
)

// Audit is what the handlers of one request tell the audit log: the object the request is
// about, the decoded request and response objects (only when the policy's level wants them)
// and annotations (admission webhooks that failed open, policies in Audit mode, and later
// the lifecycle engine's operator and phase). Every method is safe on a nil *Audit (a
// request that is not audited) and for concurrent use.
type Audit struct {
	// WantRequest and WantResponse are set by the audit filter from the policy level:
	// handlers report request and response objects only when asked.
	WantRequest, WantResponse bool

	mu             sync.Mutex
	name           string
	namespace      string
	uid            string
	rv             string
	requestObject  any
	responseObject any
	annotations    map[string]string
	impersonated   *User
	phase          string
}

type auditKey struct{}

// WithAudit returns a context that carries a.
func WithAudit(ctx context.Context, a *Audit) context.Context {
	return context.WithValue(ctx, auditKey{}, a)
}

// AuditFrom returns the request's audit record, or nil when the request is not audited.
func AuditFrom(ctx context.Context) *Audit {
	a, _ := ctx.Value(auditKey{}).(*Audit)
	return a
}

// SetObject records the object the request acts on (its name, namespace, UID and
// resourceVersion fill the event's objectRef).
func (a *Audit) SetObject(name, namespace, uid, resourceVersion string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if name != "" {
		a.name = name
	}
	if namespace != "" {
		a.namespace = namespace
	}
	if uid != "" {
		a.uid = uid
	}
	if resourceVersion != "" {
		a.rv = resourceVersion
	}
}

// Object returns what SetObject recorded.
func (a *Audit) Object() (name, namespace, uid, resourceVersion string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.name, a.namespace, a.uid, a.rv
}

// SetRequestObject records the decoded request body (a JSON-marshalable value).
func (a *Audit) SetRequestObject(v any) {
	if a == nil || !a.WantRequest {
		return
	}
	a.mu.Lock()
	a.requestObject = v
	a.mu.Unlock()
}

// SetResponseObject records the response body (a JSON-marshalable value).
func (a *Audit) SetResponseObject(v any) {
	if a == nil || !a.WantResponse {
		return
	}
	a.mu.Lock()
	a.responseObject = v
	a.mu.Unlock()
}

// Objects returns the recorded request and response objects.
func (a *Audit) Objects() (req, resp any) {
	if a == nil {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requestObject, a.responseObject
}

// SetPhase records the lifecycle phase (status.phase) of the object the request returned.
func (a *Audit) SetPhase(phase string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.phase = phase
}

// Phase is the phase SetPhase recorded.
func (a *Audit) Phase() string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.phase
}

// AddAnnotation adds an annotation to the request's audit events; the first value of a key
// wins, as upstream.
func (a *Audit) AddAnnotation(key, value string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.annotations == nil {
		a.annotations = map[string]string{}
	}
	if _, ok := a.annotations[key]; !ok {
		a.annotations[key] = value
	}
}

// Annotations returns a copy of the annotations.
func (a *Audit) Annotations() map[string]string {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.annotations) == 0 {
		return nil
	}
	out := make(map[string]string, len(a.annotations))
	for k, v := range a.annotations {
		out[k] = v
	}
	return out
}

// SetImpersonatedUser records the user a request acts as (the impersonation filter calls
// it; the event's user stays the one who authenticated).
func (a *Audit) SetImpersonatedUser(u *User) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.impersonated = u
	a.mu.Unlock()
}

// ImpersonatedUser returns what SetImpersonatedUser recorded.
func (a *Audit) ImpersonatedUser() *User {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.impersonated
}
