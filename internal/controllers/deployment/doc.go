// Package deployment is the Deployment controller: it turns each Deployment into
// ReplicaSets (one per pod template, named <deployment>-<pod-template-hash>) and rolls
// pods from the old ones to the new one under the Deployment's strategy (RollingUpdate
// with maxSurge/maxUnavailable, or Recreate), keeps revision history
// (revisionHistoryLimit), honours pause, rollback and minReadySeconds, and writes the
// Deployment's status and its Progressing/Available conditions, which kubectl rollout
// status and Helm --wait read.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/deployment,
// kube-controller-manager's deployment-controller) over the API with client-go informers
// and its own identity (system:kube-controller:deployment-controller); the server runs it
// on the holder of the kube-system/kube-deployment-controller Lease. Upstream's
// controller keeps no state that the informers' caches cannot rebuild, so a new
// leadership term (or a server restarted after kill -9) carries a rollout on where it
// stood. Events are recorded as "deployment-controller" through upstream's broadcaster.
package deployment
