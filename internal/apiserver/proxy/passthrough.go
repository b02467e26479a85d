package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	upgradeproxy "k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/node"
	"k8s.io/kubernetes/pkg/registry/core/pod"

	"kubeos.dev/kube/internal/apiserver/request"
)

// serveProxy is upstream's pods/proxy, nodes/proxy and services/proxy: the name may carry
// a scheme and port ([scheme:]name[:port]); the request, with the path after the
// subresource, is passed to the pod's IP, the node's agent (or another port of the node),
// or a ready endpoint of the service, URLs in HTML answers rewritten to come back through
// the proxy. Upgrades (WebSockets to a pod) pass through.
func (h *handler) serveProxy(w http.ResponseWriter, r *http.Request, info *request.Info, ep endpoint) {
	ctx := r.Context()
	var (
		location  *url.URL
		transport http.RoundTripper
		err       error
	)
	switch ep {
	case podProxy:
		location, transport, err = pod.ResourceLocation(ctx, podGetter{h.objects, info.Namespace}, h.proxyTransport, info.Name)
	case nodeProxy:
		location, transport, err = node.ResourceLocation(nodeGetter{h.objects}, h.nodes, h.proxyTransport, ctx, info.Name)
	default:
		location, transport, err = h.serviceLocation(ctx, info.Namespace, info.Name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	location.Path = utilnet.JoinPreservingTrailingSlash(location.Path, info.SubresourcePath())
	hw, _ := hijackable(w)
	upgradeproxy.NewUpgradeAwareHandler(location, transport, true, false, upgradeproxy.NewErrorResponder(responder{w})).ServeHTTP(hw, r)
}

// serviceLocation is upstream's service REST ResourceLocation: a random ready endpoint of
// the named port (a port number is first mapped to its port's name), whose target pod
// exists in the namespace and holds the endpoint's address.
func (h *handler) serviceLocation(ctx context.Context, namespace, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, nil, badRequestf("invalid service request %q", id)
	}
	if num, err := strconv.ParseInt(port, 10, 64); err == nil {
		svc, err := h.objects.Service(ctx, namespace, name)
		if err != nil {
			return nil, nil, err
		}
		found := false
		for _, p := range svc.Spec.Ports {
			if int64(p.Port) == num {
				port, found = p.Name, true
				break
			}
		}
		if !found {
			return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", num, name))
		}
	}
	slices, err := h.objects.EndpointSlices(ctx, namespace, name)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	if len(slices) == 0 {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	hostPort, err := translator.RandomEndpoint(name, slices, port, h.primaryIPFamily, func(ep *discoveryv1.Endpoint) bool {
		return h.endpointIsPod(ctx, namespace, ep)
	})
	if err != nil {
		return nil, nil, err
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, h.proxyTransport, nil
}

// endpointIsPod reports whether ep targets a pod of namespace that holds its address:
// only pods are proxied to, never an address an endpoint slice's writer chose.
func (h *handler) endpointIsPod(ctx context.Context, namespace string, ep *discoveryv1.Endpoint) bool {
	if ep.TargetRef == nil || ep.TargetRef.Namespace != namespace || len(ep.Addresses) == 0 {
		return false
	}
	p, err := h.objects.Pod(ctx, namespace, ep.TargetRef.Name)
	if err != nil {
		return false
	}
	for _, ip := range p.Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return true
		}
	}
	return false
}

// nodeGetter is upstream's node.ResourceGetter over Objects, in the internal type.
type nodeGetter struct{ objects Objects }

func (g nodeGetter) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	n, err := g.objects.Node(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &api.Node{}
	if err := legacyscheme.Scheme.Convert(n, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
