// Package resourcequota is the ResourceQuota controller: it writes every ResourceQuota's
// status (hard copied from spec, used computed by upstream's quota evaluators — pods,
// services, PVCs, object counts of every served namespaced resource found by discovery)
// and recomputes it when quota'd objects change, so that the ResourceQuota admission
// plugin, which refuses writes in a namespace whose quota status is not yet known, admits
// them and refuses those exceeding the quota with upstream's message. It runs upstream's own
// controller (k8s.io/kubernetes/pkg/controller/resourcequota with pkg/quota/v1/install,
// kube-controller-manager's resourcequota-controller) over the API with client-go typed and
// metadata informers and its own identity, on the holder of the
// kube-system/kube-resourcequota-controller Lease.
package resourcequota
