// Package bootstrapsigner publishes and signs the cluster-info ConfigMap in kube-public.
//
// On start it makes sure kube-public/cluster-info exists with a "kubeconfig" key naming the
// server and its CA, readable by anyone (kubeadm's kubeadm:bootstrap-signer-clusterinfo Role
// and RoleBinding to system:anonymous) — what kubeadm writes — then runs upstream's bootstrap signer
// (k8s.io/kubernetes/pkg/controller/bootstrap, kube-controller-manager's
// bootstrap-signer-controller): for every bootstrap token Secret in kube-system
// (bootstrap.kubernetes.io/token, usage-bootstrap-signing) it adds a detached JWS of the
// kubeconfig under "jws-kubeconfig-<token-id>", and removes signatures of tokens that are
// gone. A joining node (`kube agent --token`) reads cluster-info anonymously and checks the
// signature with its token before trusting the CA. It runs over the API with client-go
// informers and its own identity, on the holder of the
// kube-system/kube-bootstrap-signer-controller Lease.
package bootstrapsigner
