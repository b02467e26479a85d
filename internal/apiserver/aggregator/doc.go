// Package aggregator is Kube's API aggregation layer (kube-aggregator's role): requests for
// a group-version that an APIService (apiregistration.k8s.io/v1) hands to a Service are
// proxied to that extension API server, and the server's discovery lists what the
// available extension servers serve.
//
// Contract:
//   - Handler answers /apis/<group>/<version>[/...] for remote group-versions (an APIService
//     with spec.service) after the server's filter chain authenticated and authorised the
//     request; everything else goes to the next handler. The request is forwarded to a
//     ready endpoint of the Service (endpoint routing, resolved from its EndpointSlices, as
//     kube-apiserver's --enable-aggregator-routing), over TLS verified with the APIService's
//     caBundle as <service>.<namespace>.svc (or insecureSkipTLSVerify), presenting the
//     front-proxy client certificate; the caller's identity travels in X-Remote-User,
//     X-Remote-Uid, X-Remote-Group and X-Remote-Extra-* (the caller's own Authorization and
//     Impersonate-* headers are dropped). Watches and upgrades (exec-style streams) pass
//     through unbuffered. An extension server that cannot be reached answers 503.
//   - The availability check (every 10 s and when APIServices, Services or EndpointSlices
//     change) sets each remote APIService's Available condition as upstream's controller:
//     ServiceNotFound, ServiceAccessError, MissingEndpoints, FailedDiscoveryCheck, or True
//     with reason Passed once GET /apis/<group>/<version> answered 2xx as
//     system:kube-aggregator in system:masters; the resource list it returned is what
//     discovery serves for that group-version (Groups).
//   - Local APIServices (no service) are internal/controllers/apiservice's.
package aggregator
