// Package server is the node agent's HTTPS API, what the API server's pods/log, exec,
// attach, portforward and nodes/proxy reach (internal/apiserver/proxy), on the kubelet's
// paths:
//
//   - GET /containerLogs/{ns}/{pod}/{container}: the CRI log file read by
//     k8s.io/cri-client's log reader (follow, previous, tailLines, timestamps, sinceSeconds,
//     sinceTime, limitBytes);
//   - /exec/{ns}/{pod}/{container}, /attach/..., /portForward/{ns}/{pod}: the runtime's
//     streaming URL (CRI Exec, Attach, PortForward) proxied as the kubelet proxies it
//     (apimachinery's UpgradeAwareHandler): SPDY, and WebSocket where the runtime speaks it;
//   - GET /stats/summary (the kubelet's statsapi Summary; only_cpu_and_memory=true),
//     /metrics/resource (the resource metrics metrics-server scrapes), /metrics/cadvisor
//     (cAdvisor-shaped container series) from Options.Stats (internal/agent/stats), and
//     /metrics (the agent's own, Options.Metrics, with the kubelet_volume_stats_* gauges
//     of the PersistentVolumeClaims its pods mount) — stats.go;
//   - /healthz, /pods.
//
// Authentication and authorisation are the kubelet's, from k8s.io/apiserver's delegating
// authenticator and authorizer (auth.go): a client certificate signed by the cluster's
// client CA (Options.ClientCA; the user is its CN, the groups its O), or a bearer token
// checked by a TokenReview (answers cached two minutes) — a ServiceAccount's token, as
// metrics-server sends; no anonymous access but to GET /healthz (401 otherwise). A caller
// is then authorised by SubjectAccessReview on nodes/<subresource> of this node, with the
// kubelet's mapping (Attributes: stats for /stats, metrics for /metrics, log for /logs,
// pods then proxy for /pods, healthz then proxy for /healthz/..., proxy for the rest; verb
// from the method), allowed answers cached five minutes and denials thirty seconds.
// Failures answer a metav1.Status with the kubelet's message: 401 Unauthorized, 403
// "Forbidden (user=…, verb=…, resource=nodes, subresource(s)=[…])", 500 when a review
// could not be made. The serving certificate is self-signed (kept in the agent's cert
// directory), as the kubelet's without a serving CSR.
package server
