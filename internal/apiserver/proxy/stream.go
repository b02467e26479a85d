package proxy

import (
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	upgradeproxy "k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/client"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"kubeos.dev/kube/internal/apiserver/request"
)

// serveStream is upstream's ExecREST, AttachREST and PortForwardREST: the options decoded,
// `create` checked (a WebSocket GET was authorized as `get`), the container and node
// found, and the client's upgrade passed to the node agent. SPDY (POST) goes through as it
// is; a WebSocket v5 exec or attach is translated to SPDY toward the agent and a WebSocket
// port-forward tunnelled, unless the agent declares ExtendWebSocketsToKubelet; other
// WebSocket subprotocols (v4 and older, base64) go through to the agent as they are.
func (h *handler) serveStream(w http.ResponseWriter, r *http.Request, info *request.Info, ep endpoint) {
	var opts runtime.Object
	switch ep {
	case podExec:
		opts = &api.PodExecOptions{}
	case podAttach:
		opts = &api.PodAttachOptions{}
	default:
		opts = &api.PodPortForwardOptions{}
	}
	if err := legacyscheme.ParameterCodec.DecodeParameters(r.URL.Query(), corev1.SchemeGroupVersion, opts); err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	ctx := r.Context()
	if featureEnabled(features.AuthorizePodWebsocketUpgradeCreatePermission) {
		if se := h.authorizeCreate(ctx, info); se != nil {
			writeError(w, se)
			return
		}
	}
	hw, ok := hijackable(w)
	if !ok && httpstream.IsUpgradeRequest(r) {
		writeError(w, apierrors.NewBadRequest("an upgrade to a streaming protocol needs HTTP/1.1"))
		return
	}
	getter := podGetter{h.objects, info.Namespace}
	var (
		location *url.URL
		conn     *client.ConnectionInfo
		err      error
		streams  translator.Options
	)
	switch o := opts.(type) {
	case *api.PodExecOptions:
		location, conn, err = pod.ExecLocation(ctx, getter, h.nodes, info.Name, o)
		streams = translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}
	case *api.PodAttachOptions:
		location, conn, err = pod.AttachLocation(ctx, getter, h.nodes, info.Name, o)
		streams = translator.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Tty: o.TTY}
	case *api.PodPortForwardOptions:
		location, conn, err = pod.PortForwardLocation(ctx, getter, h.nodes, info.Name, o)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	var handler http.Handler = upgradeproxy.NewUpgradeAwareHandler(location, conn.Transport, false, true, upgradeproxy.NewErrorResponder(responder{w}))
	if !agentSpeaksWebSockets(conn) {
		switch {
		case ep == podPortForward && featureEnabled(features.PortForwardWebsockets):
			handler = translator.NewTranslatingHandler(handler, translator.NewTunnelingHandler(handler), wsstream.IsWebSocketRequestWithTunnelingProtocol)
		case ep != podPortForward && featureEnabled(features.TranslateStreamCloseWebsocketRequests):
			streamTranslator := translator.NewStreamTranslatorHandler(location, conn.Transport, 0, streams)
			handler = translator.NewTranslatingHandler(handler, streamTranslator, wsstream.IsWebSocketRequestWithStreamCloseProtocol)
		}
	}
	if httpstream.IsUpgradeRequest(r) {
		// An upgrade carries no body; forwarding the (wrapped, hence chunked) body would put
		// its terminator in front of the agent's first SPDY frame.
		r = r.Clone(r.Context())
		r.Body, r.ContentLength, r.TransferEncoding = http.NoBody, 0, nil
	}
	handler.ServeHTTP(hw, r)
}
