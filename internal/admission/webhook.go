package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"sync"
	"time"

	"github.com/google/uuid"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"kubeos.dev/kube/internal/apiserver/request"
)

// WebhookOptions configure the webhook plugins.
type WebhookOptions struct {
	Source Source
	// ClientCert, when set, is presented to every webhook (mutual TLS,
	// --admission-client-cert/--admission-client-key).
	ClientCert *tls.Certificate
	// ResolveService turns a webhook's clientConfig.service (namespace, name, Service
	// port) into the address to call, as kube-apiserver's service resolver (Kube routes to
	// a ready endpoint, as kube-apiserver with --enable-aggregator-routing). nil: webhooks
	// that name a service fail their calls with an error that says so.
	ResolveService func(namespace, name string, port int32) (*url.URL, error)
}

// webhook is what a mutating and a validating webhook share.
type webhook struct {
	name          string
	clientConfig  admissionregistrationv1.WebhookClientConfig
	rules         []admissionregistrationv1.RuleWithOperations
	failurePolicy admissionregistrationv1.FailurePolicyType
	matchPolicy   admissionregistrationv1.MatchPolicyType
	nsSelector    *metav1.LabelSelector
	objSelector   *metav1.LabelSelector
	sideEffects   admissionregistrationv1.SideEffectClass
	timeout       time.Duration
	reinvoke      bool
	// matchConditions are CEL conditions that must all be true for the webhook to be
	// called; kind ("admit" or "validating"), config and resourceVersion key their
	// compiled form.
	matchConditions []admissionregistrationv1.MatchCondition
	kind            string
	config          string
	configRV        string
}

func fromMutating(c *admissionregistrationv1.MutatingWebhookConfiguration, w *admissionregistrationv1.MutatingWebhook) webhook {
	h := webhook{name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules, nsSelector: w.NamespaceSelector, objSelector: w.ObjectSelector,
		matchConditions: w.MatchConditions, kind: "admit", config: c.Name, configRV: c.ResourceVersion}
	h.fill(w.FailurePolicy, w.MatchPolicy, w.SideEffects, w.TimeoutSeconds)
	h.reinvoke = w.ReinvocationPolicy != nil && *w.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
	return h
}

func fromValidating(c *admissionregistrationv1.ValidatingWebhookConfiguration, w *admissionregistrationv1.ValidatingWebhook) webhook {
	h := webhook{name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules, nsSelector: w.NamespaceSelector, objSelector: w.ObjectSelector,
		matchConditions: w.MatchConditions, kind: "validating", config: c.Name, configRV: c.ResourceVersion}
	h.fill(w.FailurePolicy, w.MatchPolicy, w.SideEffects, w.TimeoutSeconds)
	return h
}

// fill applies the v1 defaults: Fail, Equivalent, 10 s.
func (h *webhook) fill(fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, se *admissionregistrationv1.SideEffectClass, ts *int32) {
	h.failurePolicy = admissionregistrationv1.Fail
	if fp != nil {
		h.failurePolicy = *fp
	}
	h.matchPolicy = admissionregistrationv1.Equivalent
	if mp != nil {
		h.matchPolicy = *mp
	}
	h.sideEffects = admissionregistrationv1.SideEffectClassUnknown
	if se != nil {
		h.sideEffects = *se
	}
	h.timeout = 10 * time.Second
	if ts != nil && *ts > 0 {
		h.timeout = time.Duration(*ts) * time.Second
	}
}

// exemptConfiguration: webhooks are never called for the admission configuration kinds
// (webhook configurations, admission policies and their bindings), so that no webhook can
// change or block its own removal — upstream's IsExemptAdmissionConfigurationResource.
func exemptConfiguration(a *Attributes) bool {
	if a.Kind.Group != admissionregistrationv1.GroupName {
		return false
	}
	switch a.Kind.Kind {
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
		return true
	}
	return false
}

// matches decides whether the webhook is called for a.
func (h *webhook) matches(ctx context.Context, src Source, a *Attributes) (bool, error) {
	ruled := false
	for _, r := range h.rules {
		if RuleMatches(r, a, a.Namespaced, h.matchPolicy == admissionregistrationv1.Exact) {
			ruled = true
			break
		}
	}
	if !ruled {
		return false, nil
	}
	if ok, err := namespaceSelectorMatches(ctx, src, h.nsSelector, a); err != nil || !ok {
		return false, err
	}
	return ObjectSelectorMatches(h.objSelector, a)
}

// namespaceSelectorMatches is upstream's rule: a namespace is matched on its own labels,
// other cluster-scoped objects always match, namespaced objects match on their namespace's
// labels.
func namespaceSelectorMatches(ctx context.Context, src Source, sel *metav1.LabelSelector, a *Attributes) (bool, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return true, nil
	}
	if a.Resource.Group == "" && a.Resource.Resource == "namespaces" && a.Subresource == "" {
		l := labelsOf(a, false)
		if l == nil {
			l = labelsOf(a, true)
		}
		return SelectorMatches(sel, l)
	}
	if a.Namespace == "" {
		return true, nil
	}
	ns := src.Namespace(ctx, a.Namespace)
	if ns == nil {
		// No such namespace: 404 for it, as upstream's namespace matcher answers. Creates and
		// updates meet NamespaceLifecycle's 404 before; deletes and connects, which that
		// plugin lets through, meet it here.
		return false, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, a.Namespace)
	}
	return SelectorMatches(sel, ns.Labels)
}

// Webhooks calls the admission webhooks. Its Admit runs the mutating webhooks, Validate the
// validating ones (in parallel).
type Webhooks struct {
	o WebhookOptions

	mu      sync.Mutex
	clients map[clientKey]*http.Client
	// matchers are the webhooks' compiled matchConditions by kind/config/webhook.
	matchers map[string]compiledMatcher
}

// compiledMatcher is one webhook's matchConditions compiled at a configuration
// resourceVersion.
type compiledMatcher struct {
	rv      string
	matcher matchconditions.Matcher
}

// NewWebhooks returns the webhook plugins.
func NewWebhooks(o WebhookOptions) *Webhooks {
	return &Webhooks{o: o, clients: map[clientKey]*http.Client{}, matchers: map[string]compiledMatcher{}}
}

// conditionsMatch evaluates the webhook's matchConditions (upstream's CEL environment:
// object, oldObject, request, authorizer). false: not called. An evaluation error refuses
// the request (403) under failurePolicy Fail; under Ignore the webhook is skipped.
func (w *Webhooks) conditionsMatch(ctx context.Context, h webhook, a *Attributes) (bool, error) {
	if len(h.matchConditions) == 0 {
		return true, nil
	}
	m, err := w.matcher(h)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	r := m.Match(ctx, versionedAttributes(a), nil, nil)
	if r.Error != nil {
		return false, apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, r.Error)
	}
	return r.Matches, nil
}

// matcher compiles a webhook's matchConditions once per configuration resourceVersion.
func (w *Webhooks) matcher(h webhook) (matchconditions.Matcher, error) {
	key := h.kind + "/" + h.config + "/" + h.name
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.matchers[key]; ok && c.rv == h.configRV {
		return c.matcher, nil
	}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, fmt.Errorf("failed to initialize CEL compiler: %w", err)
	}
	acc := make([]plugincel.ExpressionAccessor, len(h.matchConditions))
	for i := range h.matchConditions {
		acc[i] = (*matchconditions.MatchCondition)(&h.matchConditions[i])
	}
	fp := h.failurePolicy
	m := matchconditions.NewMatcher(compiler.CompileCondition(acc, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions),
		&fp, "webhook", h.kind, h.name)
	if len(w.matchers) > 4096 { // configurations come and go: forget them all now and then
		clear(w.matchers)
	}
	w.matchers[key] = compiledMatcher{rv: h.configRV, matcher: m}
	return m, nil
}

var (
	_ Mutator   = (*Webhooks)(nil)
	_ Validator = (*Webhooks)(nil)
)

// Admit runs the matching mutating webhooks in order (configurations by name, webhooks in
// their order), applying their JSON patches; webhooks with reinvocationPolicy IfNeeded run
// once more when a later webhook changed the object.
func (w *Webhooks) Admit(ctx context.Context, a *Attributes) error {
	type called struct {
		h     webhook
		index int
		after []byte // the object right after this webhook ran
	}
	if exemptConfiguration(a) {
		return nil
	}
	var hooks []webhook
	for _, c := range w.o.Source.MutatingWebhookConfigurations() {
		for i := range c.Webhooks {
			hooks = append(hooks, fromMutating(c, &c.Webhooks[i]))
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	var reinvoke []called
	var lastChange int = -1
	for i, h := range hooks {
		changed, err := w.callMutating(ctx, h, a, 0, i)
		if err != nil {
			return err
		}
		if changed {
			lastChange = i
		}
		if h.reinvoke {
			reinvoke = append(reinvoke, called{h: h, index: i})
		}
	}
	for _, c := range reinvoke {
		if lastChange > c.index {
			if _, err := w.callMutating(ctx, c.h, a, 1, c.index); err != nil {
				return err
			}
		}
	}
	return nil
}

// callMutating calls one mutating webhook if it matches; changed reports a patch applied.
func (w *Webhooks) callMutating(ctx context.Context, h webhook, a *Attributes, round, index int) (bool, error) {
	ok, err := h.matches(ctx, w.o.Source, a)
	if err != nil || !ok {
		return false, err
	}
	if ok, err := w.conditionsMatch(ctx, h, a); err != nil || !ok {
		return false, err
	}
	if err := h.dryRunRefusal(a); err != nil {
		return false, err
	}
	resp, err := w.call(ctx, h, a)
	if err != nil {
		return false, w.failure(ctx, h, "mutating", round, index, err)
	}
	w.record(ctx, h, resp)
	if !resp.Allowed {
		return false, deniedError(h.name, resp.Result)
	}
	if len(resp.Patch) == 0 {
		return false, nil
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		return false, w.failure(ctx, h, "mutating", round, index, fmt.Errorf("unsupported patch type %v", resp.PatchType))
	}
	if a.Object == nil {
		return false, w.failure(ctx, h, "mutating", round, index, errors.New("a patch for an operation without an object"))
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		return false, w.failure(ctx, h, "mutating", round, index, fmt.Errorf("decoding the patch: %w", err))
	}
	orig, err := json.Marshal(a.Object.Object)
	if err != nil {
		return false, err
	}
	patched, err := patch.Apply(orig)
	if err != nil {
		return false, w.failure(ctx, h, "mutating", round, index, fmt.Errorf("applying the patch: %w", err))
	}
	if bytes.Equal(orig, patched) {
		return false, nil
	}
	m := map[string]any{}
	if err := json.Unmarshal(patched, &m); err != nil {
		return false, w.failure(ctx, h, "mutating", round, index, fmt.Errorf("the patched object: %w", err))
	}
	a.Object.Object = normalize(m).(map[string]any)
	request.AuditFrom(ctx).AddAnnotation(fmt.Sprintf("patch.webhook.admission.k8s.io/round_%d_index_%d", round, index),
		fmt.Sprintf(`{"webhook":%q,"patchType":"JSONPatch"}`, h.name))
	return true, nil
}

// normalize makes JSON numbers int64 where they are integers, as unstructured objects hold
// them.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalize(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = normalize(x)
		}
		return t
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	}
	return v
}

// Validate calls the matching validating webhooks in parallel; the first refusal (in
// webhook order) is the answer.
func (w *Webhooks) Validate(ctx context.Context, a *Attributes) error {
	if exemptConfiguration(a) {
		return nil
	}
	var hooks []webhook
	for _, c := range w.o.Source.ValidatingWebhookConfigurations() {
		for i := range c.Webhooks {
			hooks = append(hooks, fromValidating(c, &c.Webhooks[i]))
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	errs := make([]error, len(hooks))
	var wg sync.WaitGroup
	for i, h := range hooks {
		ok, err := h.matches(ctx, w.o.Source, a)
		if err == nil && ok {
			ok, err = w.conditionsMatch(ctx, h, a)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		if !ok {
			continue
		}
		if errs[i] = h.dryRunRefusal(a); errs[i] != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := w.call(ctx, h, a)
			if err != nil {
				errs[i] = w.failure(ctx, h, "validating", 0, i, err)
				return
			}
			w.record(ctx, h, resp)
			if !resp.Allowed {
				errs[i] = deniedError(h.name, resp.Result)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// record passes a response's warnings and audit annotations on.
func (w *Webhooks) record(ctx context.Context, h webhook, resp *admissionv1.AdmissionResponse) {
	for _, text := range resp.Warnings {
		request.AddWarning(ctx, text)
	}
	for k, v := range resp.AuditAnnotations {
		request.AuditFrom(ctx).AddAnnotation(h.name+"/"+k, v)
	}
}

// failure applies the failure policy to a webhook that could not be called or answered
// nonsense: Ignore lets the request pass (the audit event says so), Fail refuses it.
func (w *Webhooks) failure(ctx context.Context, h webhook, kind string, round, index int, err error) error {
	if h.failurePolicy == admissionregistrationv1.Ignore {
		request.AuditFrom(ctx).AddAnnotation(fmt.Sprintf("failed-open.%s.webhook.admission.k8s.io/round_%d_index_%d", kind, round, index), h.name)
		return nil
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	return apierrors.NewInternalError(fmt.Errorf("failed calling webhook %q: %w", h.name, err))
}

// deniedError is upstream's refusal: "admission webhook "<name>" denied the request: ...".
func deniedError(name string, result *metav1.Status) error {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	denied := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = denied + ": " + st.Message
	case st.Reason != "":
		st.Message = denied + ": " + string(st.Reason)
	default:
		st.Message = denied + " without explanation"
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return &apierrors.StatusError{ErrStatus: st}
}

// dryRunRefusal: a dry run must not reach a webhook with side effects; as upstream, the
// request is refused whatever the failure policy.
func (h *webhook) dryRunRefusal(a *Attributes) error {
	if a.DryRun && h.sideEffects != admissionregistrationv1.SideEffectClassNone && h.sideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
		return apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
	}
	return nil
}

// call sends an AdmissionReview v1 and checks the answer.
func (w *Webhooks) call(ctx context.Context, h webhook, a *Attributes) (*admissionv1.AdmissionResponse, error) {
	u, serverName, err := w.webhookURL(h.clientConfig)
	if err != nil {
		return nil, err
	}
	// ?timeout=: the webhook's timeout, as upstream's REST client adds it
	if pu, perr := url.Parse(u); perr == nil {
		q := pu.Query()
		q.Set("timeout", h.timeout.String())
		pu.RawQuery = q.Encode()
		u = pu.String()
	}
	client, err := w.client(h.clientConfig.CABundle, serverName)
	if err != nil {
		return nil, err
	}
	review, uid, err := reviewRequest(a)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to call webhook: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 3<<20))
	if err != nil {
		return nil, fmt.Errorf("failed to call webhook: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("failed to call webhook: the server responded with the status code %d", resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("received invalid webhook response: %w", err)
	}
	if out.Response == nil {
		return nil, errors.New("webhook response was absent")
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", out.APIVersion, out.Kind)
	}
	if out.Response.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, out.Response.UID)
	}
	return out.Response, nil
}

// webhookURL is the address a webhook is called at and, for a service reference, the TLS
// server name its certificate must carry (<service>.<namespace>.svc, as upstream checks it).
// A service is resolved on every call, so a webhook follows its endpoints.
func (w *Webhooks) webhookURL(cc admissionregistrationv1.WebhookClientConfig) (string, string, error) {
	if s := cc.Service; s != nil {
		if w.o.ResolveService == nil {
			return "", "", fmt.Errorf("clientConfig.service (%s/%s) cannot be resolved by this server: use clientConfig.url", s.Namespace, s.Name)
		}
		port := int32(443)
		if s.Port != nil {
			port = *s.Port
		}
		u, err := w.o.ResolveService(s.Namespace, s.Name, port)
		if err != nil {
			// %v, not %w: the resolver's NotFound or ServiceUnavailable is not the request's status
			return "", "", fmt.Errorf("failed to call webhook: service %s/%s:%d: %v", s.Namespace, s.Name, port, err)
		}
		if s.Path != nil {
			u = u.JoinPath(*s.Path)
		}
		return u.String(), s.Name + "." + s.Namespace + ".svc", nil
	}
	if cc.URL == nil {
		return "", "", errors.New("clientConfig has neither url nor service")
	}
	u, err := url.Parse(*cc.URL)
	if err != nil || u.Scheme != "https" {
		return "", "", fmt.Errorf("clientConfig.url %q must be an https URL", *cc.URL)
	}
	return *cc.URL, "", nil
}

// clientKey names a cached HTTP client: the CA bundle it trusts and the server name it
// verifies ("" for a URL webhook: the URL's host).
type clientKey struct {
	ca         [32]byte
	serverName string
}

// client returns the HTTP client that trusts caBundle (the system roots when empty),
// verifies serverName when set and presents the admission client certificate.
func (w *Webhooks) client(caBundle []byte, serverName string) (*http.Client, error) {
	key := clientKey{sha256.Sum256(caBundle), serverName}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.clients[key]; ok {
		return c, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("clientConfig.caBundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if w.o.ClientCert != nil {
		cert := w.o.ClientCert
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     tc,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}}
	w.clients[key] = c
	return c, nil
}

// reviewRequest builds the AdmissionReview v1 sent to a webhook.
func reviewRequest(a *Attributes) (*admissionv1.AdmissionReview, types.UID, error) {
	uid := types.UID(uuid.NewString())
	gvk := metav1.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind}
	gvr := metav1.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource}
	dry := a.DryRun
	req := &admissionv1.AdmissionRequest{
		UID: uid, Kind: gvk, Resource: gvr, SubResource: a.Subresource,
		RequestKind: &gvk, RequestResource: &gvr, RequestSubResource: a.Subresource,
		Name: a.Name, Namespace: a.Namespace, Operation: admissionv1.Operation(a.Operation),
		DryRun: &dry,
	}
	if a.User != nil {
		req.UserInfo = authnv1.UserInfo{Username: a.User.Name, UID: a.User.UID, Groups: a.User.Groups}
		if len(a.User.Extra) > 0 {
			req.UserInfo.Extra = map[string]authnv1.ExtraValue{}
			for k, v := range a.User.Extra {
				req.UserInfo.Extra[k] = v
			}
		}
	}
	var err error
	if a.Object != nil {
		if req.Object.Raw, err = json.Marshal(a.Object.Object); err != nil {
			return nil, "", err
		}
	}
	if a.OldObject != nil {
		if req.OldObject.Raw, err = json.Marshal(a.OldObject.Object); err != nil {
			return nil, "", err
		}
	}
	req.Options = runtime.RawExtension{Raw: optionsJSON(a)}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	}, uid, nil
}

// optionsJSON is the operation's options object (CreateOptions, UpdateOptions or
// DeleteOptions), as upstream sends it; a connect has none (its options are the object):
// request.options is null, as upstream's.
func optionsJSON(a *Attributes) []byte {
	if a.Operation == Connect {
		return nil
	}
	kind := map[Operation]string{Create: "CreateOptions", Update: "UpdateOptions", Delete: "DeleteOptions"}[a.Operation]
	o := map[string]any{}
	for k, v := range a.Options {
		o[k] = v
	}
	o["apiVersion"], o["kind"] = "meta.k8s.io/v1", kind
	if a.DryRun {
		o["dryRun"] = []string{"All"}
	}
	data, _ := json.Marshal(o)
	return data
}
