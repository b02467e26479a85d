package filters

import (
	"context"
	"net/http"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/apiserver/rest"
)

// FlowControl is API priority and fairness: upstream's controller
// (k8s.io/apiserver/pkg/util/flowcontrol), which classifies each request by the
// FlowSchemas into a priority level and queues it there with shuffle sharding.
type FlowControl = utilflowcontrol.Interface

// queueWait bounds how long a request waits in its priority level's queue: a quarter of
// kube-apiserver's default request timeout (60 s), as upstream's filter bounds it.
const queueWait = 15 * time.Second

// withPriorityAndFairness runs each request through fc, as kube-apiserver's
// WithPriorityAndFairness does: the response names the matched FlowSchema and priority
// level (X-Kubernetes-PF-FlowSchema-UID, X-Kubernetes-PF-PriorityLevel-UID); a request its
// level rejects (queues full, or its wait ran out) gets 429 with Retry-After, which grows
// while the level keeps rejecting, as kube-apiserver's (upstream's DroppedRequestsTracker:
// 1 s, doubled when the level dropped at least 3 × Retry-After requests in the last
// Retry-After seconds, up to 32 s, lowered by a second at a time as drops stop), so that
// clients that honour it (client-go does) back off from a level that stays full. Requests of
// the exempt level (system:masters, health probes) are never queued. Watches and other
// long-running requests are not counted (upstream counts a watch's initialisation only).
func withPriorityAndFairness(h http.Handler, fc FlowControl, o Options) http.Handler {
	dropped := utilflowcontrol.NewDroppedRequestsTracker()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := request.InfoFrom(r.Context())
		if info == nil || info.Verb == "watch" || longRunning(info) {
			h.ServeHTTP(w, r)
			return
		}
		digest := utilflowcontrol.RequestDigest{RequestInfo: &apirequest.RequestInfo{
			IsResourceRequest: info.IsResourceRequest, Path: info.Path, Verb: info.Verb,
			APIPrefix: info.APIPrefix, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
			Namespace: info.Namespace, Resource: info.Resource, Subresource: info.Subresource,
			Name: info.Name, Parts: info.Parts,
		}}
		if u, ok := request.UserFrom(r.Context()); ok {
			digest.User = &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
		} else {
			digest.User = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
		}
		kind := "readOnly"
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			kind = "mutating"
		}
		level := ""
		note := func(fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, _ string) {
			level = pl.Name
			w.Header().Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, string(fs.UID))
			w.Header().Set(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID, string(pl.UID))
		}
		estimate := func() fcrequest.WorkEstimate { return fcrequest.WorkEstimate{InitialSeats: 1} }
		served := false
		ctx, cancel := context.WithTimeout(r.Context(), queueWait)
		defer cancel()
		fc.Handle(ctx, digest, note, estimate, func(bool) {}, func() {
			served = true
			if o.Metrics != nil {
				g := o.Metrics.InFlight.WithLabelValues(kind)
				g.Inc()
				defer g.Dec()
			}
			h.ServeHTTP(w, r)
		})
		if !served {
			dropped.RecordDroppedRequest(level)
			rest.WriteStatus(w, apierrors.NewTooManyRequests("too many requests, please try again later", int(dropped.GetRetryAfter(level))))
		}
	})
}
