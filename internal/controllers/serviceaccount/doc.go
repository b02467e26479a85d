// Package serviceaccount is the service-accounts controller: it makes sure every namespace
// has a ServiceAccount named "default" (created when a namespace appears, re-created when
// deleted), which the ServiceAccount admission plugin assigns to pods that name none. It
// runs upstream's own controller (k8s.io/kubernetes/pkg/controller/serviceaccount,
// kube-controller-manager's serviceaccount-controller) over the API with its own
// identity; the server runs it on the holder of the kube-system/kube-serviceaccount-controller
// Lease.
package serviceaccount
