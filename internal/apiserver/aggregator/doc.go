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
//   - OpenAPI (openapi.go): after each check, the documents of every available remote are
//     downloaded as system:kube-aggregator when it has none yet, when its APIService
//     changed, or once a minute (with the ETag, or the hash in the v3 index: an unchanged
//     document is not read again): /openapi/v2 filtered to /apis/<group>/<version>/ and the
//     definitions those paths use, and the group-version's /openapi/v3 document (converted
//     from v2 when the server has no /openapi/v3); a failed download is tried again after
//     10 s, doubling to 10 minutes while it fails. The last download stays while its
//     APIService exists, as kube-aggregator's; the documents go when it is deleted.
//     OpenAPIDocuments hands them to internal/apiserver/openapi (Handler.SetRemote), which
//     merges them into /openapi/v2 and lists them in /openapi/v3.
//   - Local APIServices (no service) are internal/controllers/apiservice's.
package aggregator
