package rest

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	// The v1 connect options and their conversions from query parameters, in legacyscheme.
	_ "k8s.io/kubernetes/pkg/apis/core/install"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
)

// connect serves a request to one of the kind's connect subresources (Kind.Connect): it is
// admitted first, as upstream's ConnectResource admits it, then handed to the Connect
// handler, which streams it to its node agent, pod or service.
//
// Admission sees operation CONNECT with the subresource's options as the object (v1
// PodExecOptions, PodAttachOptions, PodPortForwardOptions, PodProxyOptions,
// ServiceProxyOptions, NodeProxyOptions), decoded from the query as upstream decodes them
// (a proxy's path is the part of the URL after "proxy"). What mutating admission changes in
// them is what the Connect handler acts on: the query (exec, attach, port-forward) or the
// path (proxy) is rewritten from the admitted options. pods/log is a read with options,
// not a connect: it is not admitted. Requests the Connect handler refuses before it would
// connect (a method the subresource does not take, dryRun, options that do not decode, the
// wrong scope) skip admission, as upstream refuses them before admission runs.
func (c *call) connect() {
	if c.h.connect == nil {
		WriteStatus(c.w, ResourceNotFound())
		return
	}
	r := c.r
	if c.h.admission != nil {
		var err error
		if r, err = c.admitConnect(); err != nil {
			c.fail(err)
			return
		}
	}
	c.h.connect.ServeHTTP(c.w, r)
}

// admitConnect runs admission on a connect request and returns the request to forward:
// c.r, or a copy carrying what mutating admission changed in the options.
func (c *call) admitConnect() (*http.Request, error) {
	info := c.info
	gvk, ok := c.connectOptionsKind()
	if !ok || !slices.Contains(connectMethods(info.Subresource), c.r.Method) || c.r.URL.Query().Has("dryRun") ||
		c.kind.Namespaced != (info.Namespace != "") || (len(info.Parts) > 3 && !hasSubpath(info.Subresource)) {
		return c.r, nil
	}
	typed, err := decodeConnectOptions(gvk, c.r.URL.Query(), info)
	if err != nil {
		return c.r, nil // the Connect handler answers 400, as upstream before admission
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetGroupVersionKind(gvk)
	before := obj.DeepCopy()
	u, _ := request.UserFrom(c.ctx)
	a := &admission.Attributes{
		Operation: admission.Connect, Kind: gvk, Resource: c.kind.GVR(), Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.Name, Namespaced: c.kind.Namespaced, Object: obj, User: u,
	}
	ctx := c.admissionContext()
	if err := c.h.admission.Admit(ctx, a); err != nil {
		return nil, admissionError(err, c)
	}
	if err := c.h.admission.Validate(ctx, a); err != nil {
		return nil, admissionError(err, c)
	}
	if a.Object == nil || apiequality.Semantic.DeepEqual(before.Object, a.Object.Object) {
		return c.r, nil
	}
	return c.mutatedConnect(gvk, a.Object)
}

// connectOptionsKind is the kind of the options the subresource's connecter takes
// upstream, as discovery lists it; false for pods/log, whose discovery kind is the Pod.
func (c *call) connectOptionsKind() (schema.GroupVersionKind, bool) {
	for _, sr := range c.kind.ExtraSubresources() {
		if sr.Name != c.info.Subresource {
			continue
		}
		if sr.Kind == c.kind.Kind || !strings.HasSuffix(sr.Kind, "Options") {
			return schema.GroupVersionKind{}, false
		}
		return schema.GroupVersionKind{Group: sr.Group, Version: sr.Version, Kind: sr.Kind}, true
	}
	return schema.GroupVersionKind{}, false
}

// hasSubpath says the subresource takes a path after its name (the proxies), which
// upstream decodes into the options' path.
func hasSubpath(subresource string) bool { return subresource == "proxy" }

// connectMethods are the methods upstream's connecter of the subresource takes
// (ConnectMethods); other methods are refused with 405 before admission.
func connectMethods(subresource string) []string {
	if hasSubpath(subresource) {
		return []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}
	}
	return []string{http.MethodGet, http.MethodPost}
}

// decodeConnectOptions decodes the query (and a proxy's subpath) into the v1 options, as
// upstream's getRequestOptions: the subpath, with a leading slash and the request's
// trailing slash, replaces any "path" parameter.
func decodeConnectOptions(gvk schema.GroupVersionKind, query url.Values, info *request.Info) (runtime.Object, error) {
	obj, err := legacyscheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if hasSubpath(info.Subresource) {
		q := make(url.Values, len(query)+1)
		for k, v := range query {
			q[k] = v
		}
		q["path"] = []string{info.SubresourcePath()}
		query = q
	}
	if err := legacyscheme.ParameterCodec.DecodeParameters(query, corev1.SchemeGroupVersion, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// mutatedConnect is the request carrying the options mutating admission left: for exec,
// attach and port-forward the query is made from them (upstream forwards only what the
// options hold), for the proxies the path after the subresource is theirs.
func (c *call) mutatedConnect(gvk schema.GroupVersionKind, obj *unstructured.Unstructured) (*http.Request, error) {
	typed, err := legacyscheme.Scheme.New(gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	r := c.r.Clone(c.r.Context())
	if !hasSubpath(c.info.Subresource) {
		q, err := legacyscheme.ParameterCodec.EncodeParameters(typed, corev1.SchemeGroupVersion)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		r.URL.RawQuery = q.Encode()
		return r, nil
	}
	path, _, _ := unstructured.NestedString(obj.Object, "path")
	if path == c.info.SubresourcePath() {
		return c.r, nil
	}
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	info := *c.info
	info.Parts = slices.Clone(c.info.Parts[:3])
	if rest := strings.Trim(path, "/"); rest != "" {
		info.Parts = append(info.Parts, strings.Split(rest, "/")...)
	}
	base := "/" + info.APIPrefix + "/"
	if info.APIGroup != "" {
		base += info.APIGroup + "/"
	}
	base += info.APIVersion
	if info.Namespace != "" {
		base += "/namespaces/" + info.Namespace
	}
	info.Path = base + "/" + info.Resource + "/" + info.Name + "/" + info.Subresource + path
	r = r.WithContext(request.WithInfo(r.Context(), &info))
	r.URL.Path, r.URL.RawPath = info.Path, ""
	return r, nil
}
