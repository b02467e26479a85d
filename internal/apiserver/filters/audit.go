package filters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/google/uuid"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
	"kubeos.dev/kube/internal/audit"
)

// TraceIDHeader is the header in which the lifecycle engine (pkg/lifecycle.TraceHeader)
// sends the trace id of the reconcile making a request; the audit log records it in the
// TraceIDAnnotation of the request's events, linking them to the events on the bus.
const (
	TraceIDHeader     = "X-Kube-Trace-Id"
	TraceIDAnnotation = "lifecycle.kubeos.dev/trace-id"
	// maxTraceIDLen bounds what a client can write into the audit log through the header.
	maxTraceIDLen = 128
)

// withAudit logs each request the policy selects: RequestReceived when it arrives,
// ResponseStarted when a watch's headers go out, ResponseComplete when it ends, Panic when
// the handler panics. It runs after authentication, so events carry the user.
func withAudit(h http.Handler, log *audit.Log) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := request.InfoFrom(r.Context())
		if info == nil {
			info = request.Parse(r)
		}
		u, _ := request.UserFrom(r.Context())
		d := log.Policy.Decide(u, info)
		if d.Level == auditv1.LevelNone {
			h.ServeHTTP(w, r)
			return
		}
		ac := &request.Audit{
			WantRequest:  d.Level == auditv1.LevelRequest || d.Level == auditv1.LevelRequestResponse,
			WantResponse: d.Level == auditv1.LevelRequestResponse,
		}
		if id := r.Header.Get(TraceIDHeader); id != "" && len(id) <= maxTraceIDLen {
			ac.AddAnnotation(TraceIDAnnotation, id)
		}
		ctx := request.WithAudit(r.Context(), ac)
		id := r.Header.Get(auditv1.HeaderAuditID)
		if id == "" {
			id = uuid.NewString()
		}
		w.Header().Set(auditv1.HeaderAuditID, id)
		received := metav1.NowMicro()
		ev := &auditv1.Event{
			TypeMeta:                 metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
			Level:                    d.Level,
			AuditID:                  types.UID(id),
			RequestURI:               r.URL.RequestURI(),
			Verb:                     info.Verb,
			SourceIPs:                sourceIPs(r),
			UserAgent:                r.UserAgent(),
			RequestReceivedTimestamp: received,
		}
		if u != nil {
			ev.User = userInfo(u)
		}
		if info.IsResourceRequest {
			ev.ObjectRef = &auditv1.ObjectReference{
				Resource: info.Resource, Namespace: info.Namespace, Name: info.Name,
				APIGroup: info.APIGroup, APIVersion: info.APIVersion, Subresource: info.Subresource,
			}
		}
		// The raw body stands for the request object of writes the handler does not decode
		// itself (patches); handlers replace it with the decoded object.
		var rawBody []byte
		if ac.WantRequest && r.Body != nil && r.ContentLength != 0 && isJSON(r.Header.Get("Content-Type")) {
			data, err := io.ReadAll(io.LimitReader(r.Body, rest.MaxBodyBytes+1))
			r.Body.Close()
			if err == nil {
				rawBody = data
			}
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{err}))
		}
		emit := func(stage auditv1.Stage, e *auditv1.Event) {
			if d.Omits(stage) {
				return
			}
			e.Stage = stage
			e.StageTimestamp = metav1.NowMicro()
			e.Annotations = ac.Annotations()
			if iu := ac.ImpersonatedUser(); iu != nil {
				ui := userInfo(iu)
				e.ImpersonatedUser = &ui
			}
			_ = log.Write(ctx, e)
		}
		emit(auditv1.StageRequestReceived, copyEvent(ev))

		aw := &auditWriter{ResponseWriter: w}
		if info.Verb == "watch" {
			aw.started = func(code int) {
				e := copyEvent(ev)
				fill(e, ac, code, nil, nil)
				emit(auditv1.StageResponseStarted, e)
			}
		}
		defer func() {
			if p := recover(); p != nil {
				e := copyEvent(ev)
				fill(e, ac, http.StatusInternalServerError, nil, nil)
				e.ResponseStatus.Message = fmt.Sprintf("APIServer panic'd: %v", p)
				e.ResponseStatus.Status = metav1.StatusFailure
				e.ResponseStatus.Reason = metav1.StatusReasonInternalError
				emit(auditv1.StagePanic, e)
				panic(p)
			}
		}()
		h.ServeHTTP(aw, r.WithContext(ctx))
		code := aw.code
		if code == 0 {
			code = http.StatusOK
		}
		e := copyEvent(ev)
		fill(e, ac, code, aw.errBody.Bytes(), rawBody)
		emit(auditv1.StageResponseComplete, e)
	})
}

// fill completes an event with what the handler reported.
func fill(e *auditv1.Event, ac *request.Audit, code int, errBody, rawBody []byte) {
	if e.ObjectRef != nil {
		name, ns, uid, rv := ac.Object()
		if name != "" && e.ObjectRef.Name == "" {
			e.ObjectRef.Name = name
		}
		if ns != "" && e.ObjectRef.Namespace == "" {
			e.ObjectRef.Namespace = ns
		}
		e.ObjectRef.UID = types.UID(uid)
		e.ObjectRef.ResourceVersion = rv
	}
	st := &metav1.Status{Code: int32(code)}
	if code >= 400 {
		st.Status = metav1.StatusFailure
		var s metav1.Status
		if json.Unmarshal(errBody, &s) == nil {
			st.Message, st.Reason, st.Details = s.Message, s.Reason, s.Details
		}
	} else if code < 300 {
		st.Status = metav1.StatusSuccess
	}
	e.ResponseStatus = st
	reqObj, respObj := ac.Objects()
	if ac.WantRequest {
		if reqObj != nil {
			e.RequestObject = unknown(reqObj)
		} else if len(rawBody) > 0 {
			e.RequestObject = &runtime.Unknown{Raw: rawBody, ContentType: runtime.ContentTypeJSON}
		}
	}
	if ac.WantResponse && respObj != nil {
		e.ResponseObject = unknown(respObj)
	}
}

func unknown(v any) *runtime.Unknown {
	if raw, ok := v.(json.RawMessage); ok {
		return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return &runtime.Unknown{Raw: data, ContentType: runtime.ContentTypeJSON}
}

func copyEvent(ev *auditv1.Event) *auditv1.Event {
	e := *ev
	if ev.ObjectRef != nil {
		ref := *ev.ObjectRef
		e.ObjectRef = &ref
	}
	return &e
}

func userInfo(u *request.User) authnv1.UserInfo {
	ui := authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		ui.Extra = make(map[string]authnv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

func sourceIPs(r *http.Request) []string {
	var ips []string
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		for _, p := range strings.Split(xff, ",") {
			if ip := net.ParseIP(strings.TrimSpace(p)); ip != nil {
				ips = append(ips, ip.String())
			}
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		ips = append(ips, host)
	}
	return ips
}

func isJSON(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.HasSuffix(strings.TrimSpace(ct), "json")
}

// errReader ends a replayed body with the error reading the original hit (a body too large).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// auditWriter records the response code, keeps the body of error responses (a small
// Status) and reports when a watch's response starts.
type auditWriter struct {
	http.ResponseWriter
	code    int
	errBody bytes.Buffer
	started func(code int)
}

func (w *auditWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
		if w.started != nil {
			w.started(code)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.code >= 400 && w.errBody.Len() < 64<<10 {
		w.errBody.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *auditWriter) Flush() {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ensure the writer keeps the interfaces the handlers use
var _ http.Flusher = (*auditWriter)(nil)
