package proxy

import (
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/flushwriter"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/apiserver/request"
)

func featureEnabled(f featuregate.Feature) bool { return utilfeature.DefaultFeatureGate.Enabled(f) }

// serveLog is upstream's LogREST.Get and StreamObject: the options decoded and validated,
// the container chosen, the agent's /containerLogs streamed back as text/plain (flushed per
// write when following), 204 when the pod has no node yet.
func (h *handler) serveLog(w http.ResponseWriter, r *http.Request, info *request.Info) {
	opts := &api.PodLogOptions{}
	if err := legacyscheme.ParameterCodec.DecodeParameters(r.URL.Query(), corev1.SchemeGroupVersion, opts); err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	splitStreams := featureEnabled(features.PodLogsQuerySplitStreams)
	if splitStreams && opts.Stream == nil {
		opts.Stream = ptr.To(api.LogStreamAll)
	}
	if errs := validation.ValidatePodLogOptions(opts, splitStreams); len(errs) > 0 {
		writeError(w, apierrors.NewInvalid(api.Kind("PodLogOptions"), info.Name, errs))
		return
	}
	ctx := r.Context()
	location, transport, err := pod.LogLocation(ctx, podGetter{h.objects, info.Namespace}, h.nodes, info.Name, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	streamer := &genericrest.LocationStreamer{
		Location:        location,
		Transport:       transport,
		ContentType:     "text/plain",
		Flush:           opts.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(api.Resource("pods/log"), info.Name),
		RedirectChecker: genericrest.PreventRedirects,
	}
	out, flush, contentType, err := streamer.InputStream(ctx, "v1", r.Header.Get("Accept"))
	if err != nil {
		writeError(w, err)
		return
	}
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer out.Close()
	if wsstream.IsWebSocketRequest(r) {
		hw, ok := hijackable(w)
		if !ok {
			writeError(w, apierrors.NewBadRequest("a WebSocket upgrade needs HTTP/1.1"))
			return
		}
		// Errors here are the client going away; the stream has no one left to tell.
		_ = wsstream.NewReader(out, true, wsstream.NewDefaultReaderProtocols()).Copy(hw, r)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush() //nolint:errcheck // a writer that cannot flush still streams
	var dst io.Writer = w
	if flush {
		dst = flushwriter.Wrap(w)
	}
	_, _ = io.Copy(dst, out)
}
