// Package rootcacert is the root CA certificate publisher: every namespace gets the
// ConfigMap kube-root-ca.crt holding the cluster CA (key ca.crt), which the projected
// service-account volume (kube-api-access-*) of every pod mounts, so a pod can verify the
// API server. It runs upstream's own controller (k8s.io/kubernetes
// pkg/controller/certificates/rootcacertpublisher, kube-controller-manager's
// root-ca-certificate-publisher-controller) over the API with its own identity; the server
// runs it on the holder of the kube-system/kube-root-ca-cert-publisher Lease.
package rootcacert
