// Package tokencleaner is the bootstrap token cleaner: it deletes every bootstrap token
// Secret in kube-system (type bootstrap.kubernetes.io/token) once its "expiration" time has
// passed, so `kube token create --ttl` tokens stop working and vanish as kubeadm's do. It
// runs upstream's own controller (k8s.io/kubernetes/pkg/controller/bootstrap,
// kube-controller-manager's token-cleaner-controller) over the API with client-go
// informers and its own identity, on the holder of the
// kube-system/kube-token-cleaner-controller Lease.
package tokencleaner
