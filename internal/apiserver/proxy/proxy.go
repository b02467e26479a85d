package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
)

// defaultKubeletPort is upstream's kubelet port (k8s.io/kubernetes/pkg/cluster/ports).
const defaultKubeletPort = 10250

// AuthorizeFunc decides whether u may do what info describes (the proxy handler asks it for
// the extra `create` check of WebSocket exec, attach and port-forward). reason, when not
// empty, is appended to the 403 message.
type AuthorizeFunc func(ctx context.Context, u *request.User, info *request.Info) (allowed bool, reason string)

// Options configure the handler New returns.
type Options struct {
	// Objects reads the pods, nodes, services and endpoint slices a request needs. Required.
	Objects Objects
	// KubeletTLS is the TLS configuration toward node agents: the client certificate the
	// agents trust and the pool their serving certificates verify against. Required.
	KubeletTLS *tls.Config
	// KubeletPort is the agent port used when a Node reports none in
	// status.daemonEndpoints.kubeletEndpoint.Port; default 10250 (upstream's).
	KubeletPort int
	// PreferredAddressTypes is the order in which a Node's status.addresses are tried (as
	// kube-apiserver's --kubelet-preferred-address-types); default InternalIP, ExternalIP,
	// Hostname (kubeadm's setting: a node's host name need not resolve on the server).
	PreferredAddressTypes []corev1.NodeAddressType
	// ProxyTransport carries pods/proxy, services/proxy and nodes/proxy to a port other
	// than the agent's; default upstream's: TLS without verification (pods and services are
	// addressed by IP), no client certificate.
	ProxyTransport http.RoundTripper
	// PrimaryIPFamily is the family services/proxy prefers among endpoint slices; default
	// IPv4.
	PrimaryIPFamily corev1.IPFamily
	// Authorize is the server's authorizer (system:masters allowed). Required.
	Authorize AuthorizeFunc
}

// New returns the handler of the connect subresources pods/log, pods/exec, pods/attach,
// pods/portforward, pods/proxy, nodes/proxy and services/proxy. Requests reach it
// authenticated and authorized, with their request.Info and request.User in the context.
func New(o Options) (http.Handler, error) {
	if o.Objects == nil || o.KubeletTLS == nil || o.Authorize == nil {
		return nil, errors.New("proxy: Objects, KubeletTLS and Authorize are required")
	}
	if o.KubeletPort == 0 {
		o.KubeletPort = defaultKubeletPort
	}
	if len(o.PreferredAddressTypes) == 0 {
		o.PreferredAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName}
	}
	if o.ProxyTransport == nil {
		o.ProxyTransport = utilnet.SetTransportDefaults(&http.Transport{
			Proxy:           nil,
			DialContext:     (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream's proxy transport: pods and services are addressed by IP
		})
	}
	if o.PrimaryIPFamily == "" {
		o.PrimaryIPFamily = corev1.IPv4Protocol
	}
	kubelet := &http.Transport{
		// Node agents are reached directly, never through an environment proxy.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     o.KubeletTLS.Clone(),
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	}
	h := &handler{
		objects:   o.Objects,
		authorize: o.Authorize,
		nodes: &nodeConnections{
			objects:   o.Objects,
			port:      o.KubeletPort,
			types:     o.PreferredAddressTypes,
			transport: kubelet,
		},
		proxyTransport:  o.ProxyTransport,
		primaryIPFamily: o.PrimaryIPFamily,
	}
	return h, nil
}

type handler struct {
	objects         Objects
	authorize       AuthorizeFunc
	nodes           *nodeConnections
	proxyTransport  http.RoundTripper
	primaryIPFamily corev1.IPFamily
}

// endpoint names one connect subresource.
type endpoint int

const (
	podLog endpoint = iota + 1
	podExec
	podAttach
	podPortForward
	podProxy
	nodeProxy
	serviceProxy
)

// streamMethods are the methods of exec, attach and port-forward: POST for SPDY, GET for
// WebSockets (browsers cannot POST an upgrade).
var streamMethods = []string{http.MethodGet, http.MethodPost}

// proxyMethods are the methods the proxy subresources pass on, as upstream's.
var proxyMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}

// route decides which subresource a request addresses, or the error it gets: 404 for a
// subresource of no core kind or at the wrong scope, 405 for a method the subresource
// does not take.
func route(info *request.Info, method string) (endpoint, *apierrors.StatusError) {
	if !info.IsResourceRequest || info.APIGroup != "" || info.Name == "" {
		return 0, rest.ResourceNotFound()
	}
	var ep endpoint
	namespaced := true
	switch info.Resource + "/" + info.Subresource {
	case "pods/log":
		ep = podLog
	case "pods/exec":
		ep = podExec
	case "pods/attach":
		ep = podAttach
	case "pods/portforward":
		ep = podPortForward
	case "pods/proxy":
		ep = podProxy
	case "services/proxy":
		ep = serviceProxy
	case "nodes/proxy":
		ep, namespaced = nodeProxy, false
	default:
		return 0, rest.ResourceNotFound()
	}
	if namespaced != (info.Namespace != "") {
		return 0, rest.ResourceNotFound()
	}
	// Only the proxy subresources take a path after their name.
	if len(info.Parts) > 3 && ep != podProxy && ep != serviceProxy && ep != nodeProxy {
		return 0, rest.ResourceNotFound()
	}
	var methods []string
	switch ep {
	case podLog:
		methods = []string{http.MethodGet}
	case podExec, podAttach, podPortForward:
		methods = streamMethods
	default:
		methods = proxyMethods
	}
	if !slices.Contains(methods, method) {
		return 0, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: info.Resource + "/" + info.Subresource}, info.Verb)
	}
	return ep, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info, ok := request.InfoFrom(r.Context())
	if !ok {
		rest.WriteStatus(w, apierrors.NewInternalError(errors.New("no request info")))
		return
	}
	ep, se := route(info, r.Method)
	if se != nil {
		rest.WriteStatus(w, se)
		return
	}
	if ep != podLog && r.URL.Query().Has("dryRun") {
		// Upstream's connect handler refuses dryRun whatever its value.
		rest.WriteStatus(w, apierrors.NewBadRequest("dryRun is not supported"))
		return
	}
	switch ep {
	case podLog:
		h.serveLog(w, r, info)
	case podExec, podAttach, podPortForward:
		h.serveStream(w, r, info, ep)
	case podProxy, nodeProxy, serviceProxy:
		h.serveProxy(w, r, info, ep)
	}
}

// writeError writes err as a Status: API errors as they are, others as 500.
func writeError(w http.ResponseWriter, err error) {
	rest.WriteStatus(w, toStatus(err))
}

func toStatus(err error) *apierrors.StatusError {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return &apierrors.StatusError{ErrStatus: st.Status()}
	}
	return apierrors.NewInternalError(err)
}

// responder reports the errors of upstream's proxy handlers as a Status.
type responder struct{ w http.ResponseWriter }

func (r responder) Error(err error) { writeError(r.w, err) }

// authorizeCreate is upstream's AuthorizePodWebsocketUpgradeCreatePermission: exec, attach
// and port-forward need `create` on their subresource whatever the method (a WebSocket
// GET was authorized as `get`).
func (h *handler) authorizeCreate(ctx context.Context, info *request.Info) *apierrors.StatusError {
	if info.Verb == "create" {
		return nil
	}
	u, ok := request.UserFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(errors.New("no user in the request"))
	}
	create := *info
	create.Verb = "create"
	if ok, reason := h.authorize(ctx, u, &create); !ok {
		return filters.Forbidden(u, &create, reason)
	}
	return nil
}

// badRequestf is a 400 with a formatted message.
func badRequestf(format string, args ...any) *apierrors.StatusError {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
