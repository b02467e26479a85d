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
//     /metrics (the agent's own, Options.Metrics) — stats.go;
//   - /healthz, /pods.
//
// Callers authenticate with a client certificate signed by the cluster's client CA and are
// authorised by SubjectAccessReview on nodes/<subresource> (the kubelet's mapping: stats
// for /stats, metrics for /metrics, proxy for the others), decisions cached for a minute. The serving certificate is self-signed
// (kept in the agent's cert directory), as the kubelet's without a serving CSR.
package server
