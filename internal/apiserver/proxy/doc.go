// Package proxy serves the connect subresources, the ones that open a stream to a node
// agent or a pod rather than read or write an object: pods/log, pods/exec, pods/attach,
// pods/portforward, pods/proxy, nodes/proxy and services/proxy.
//
// New returns one http.Handler for all of them; the REST handler (internal/apiserver/rest)
// hands it every request whose subresource a kind lists in registry.Kind.Connect, after
// authentication and authorization, with request.Info and request.User in the context.
//
// What each does is kube-apiserver's, built from upstream's own pieces rather than
// retyped:
//
//   - pods/log (GET): query decoded into PodLogOptions and validated
//     (validation.ValidatePodLogOptions: 422), the container chosen (pod.LogLocation: 400
//     "a container name must be specified for pod X, choose one of: [a b]"), the agent's
//     /containerLogs/{ns}/{pod}/{container} streamed back as text/plain, flushed per write
//     when following; 204 while the pod has no node; agent errors come back with their code.
//   - pods/exec, pods/attach, pods/portforward (POST for SPDY, GET for WebSockets): `create`
//     on the subresource is checked even when the filter authorized a GET as `get`
//     (upstream's AuthorizePodWebsocketUpgradeCreatePermission); a pod without a node is 400
//     "pod X does not have a host assigned". The client's upgrade goes to the agent's
//     /exec, /attach or /portForward path through apimachinery's UpgradeAwareHandler: SPDY
//     as it is; a WebSocket v5.channel.k8s.io exec or attach is translated to SPDY
//     (k8s.io/apiserver StreamTranslatorHandler) and a WebSocket port-forward tunnelled
//     (TunnelingHandler) unless the node declares ExtendWebSocketsToKubelet; older
//     WebSocket subprotocols (v4.channel.k8s.io, base64) pass through to the agent.
//   - pods/proxy, nodes/proxy, services/proxy (GET, POST, PUT, PATCH, DELETE, HEAD,
//     OPTIONS): the name is [scheme:]name[:port]; the request with the path after
//     "proxy/" goes to the pod's IP, the node's agent (or another port of the node), or a
//     random ready endpoint of the service whose target pod holds its address. Addresses
//     that are not global unicast (loopback, link-local) are refused as upstream does.
//
// Node agents are reached at the node's preferred address (Options.PreferredAddressTypes)
// and status.daemonEndpoints.kubeletEndpoint.Port over TLS with Options.KubeletTLS, whose
// client certificate KubeletClientTLS mints from the cluster CA (CN
// kube-apiserver-kubelet-client, O system:masters); the agent's serving certificate is
// verified against the CA.
//
// Objects are read through the small Objects interface; StoreObjects implements it over
// storage. Errors are metav1.Status: client mistakes 4xx, an unreachable pod or service
// 503, an unreachable agent 500 as upstream.
package proxy
