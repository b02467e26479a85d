// Package podautoscaler is the HorizontalPodAutoscaler controller (autoscaling/v2): every
// SyncPeriod (15 s) it reads each HPA's scale target through the scale subresource, fetches
// its metrics — resource metrics from metrics.k8s.io, custom.metrics.k8s.io and
// external.metrics.k8s.io when an APIService serves them — and scales with upstream's
// tolerance, behaviour policies and stabilization windows. Where the metrics API is absent
// (nothing serves metrics.k8s.io on a plain Kube server) the HPA says so: ScalingActive=False
// with reason FailedGetResourceMetric and the API's error, and a FailedGetResourceMetric
// event, exactly as on a cluster without metrics-server. It runs upstream's own controller
// (k8s.io/kubernetes/pkg/controller/podautoscaler with its REST metrics client,
// kube-controller-manager's horizontal-pod-autoscaler-controller) over the API with
// client-go informers and its own identity, on the holder of the
// kube-system/kube-horizontal-pod-autoscaler-controller Lease.
package podautoscaler
