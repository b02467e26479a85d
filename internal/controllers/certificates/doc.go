// Package certificates is the certificate controller group kube-controller-manager runs
// (its csrapproving, csrsigning and csrcleaner controllers), for
// certificates.k8s.io/v1 CertificateSigningRequests, built from upstream's own controllers
// (k8s.io/kubernetes pkg/controller/certificates):
//
//   - approving: a CSR for the kubernetes.io/kube-apiserver-client-kubelet signer that asks
//     for a node client certificate (CN system:node:<name>, O system:nodes, client auth
//     usages) is approved (condition Approved, reason AutoApproved) when a
//     SubjectAccessReview says its requester may create certificatesigningrequests/
//     nodeclient, or certificatesigningrequests/selfnodeclient when the requester is that
//     node renewing its own certificate. The bootstrap policy (internal/rbac) grants
//     nodeclient to system:bootstrappers and selfnodeclient to system:nodes. Nothing else is
//     approved automatically: `kubectl certificate approve` does it.
//   - signing: an approved CSR for kubernetes.io/kube-apiserver-client,
//     kubernetes.io/kube-apiserver-client-kubelet or kubernetes.io/kubelet-serving gets
//     status.certificate, a certificate signed by the Kube CA (Options.CAFile and
//     CAKeyFile, re-read when they change, as kube-controller-manager's
//     --cluster-signing-cert-file). Its lifetime is spec.expirationSeconds (at least 10
//     minutes) capped by Options.Duration (--cluster-signing-duration, default one year),
//     and never beyond the CA's. A CSR the signer refuses (usages or subject not allowed
//     for the signer) gets the condition Failed, reason SignerValidationFailure, as
//     upstream. Denied and failed CSRs are never signed.
//   - request check (Kube's own, in certificates_reconcile.go): an approved CSR whose
//     spec.request is not a PEM certificate request — which upstream's validation refuses
//     at create, so it can only come from storage written otherwise — gets the condition
//     Failed, reason InvalidRequest, instead of being retried forever.
//   - cleaning: CSRs are garbage-collected as upstream's csrcleaner does (approved or denied
//     after an hour, pending after a day, issued ones once their certificate expired).
//
// The controller talks to the server only through the API with its own identity (the
// loopback configuration it is given), records events.k8s.io/v1 Events on each CSR it
// signs or fails (Signed, SigningFailed), and runs under leader election
// (internal/controllers/leader, started by the server). Start waits until the server
// serves certificatesigningrequests before it starts its informers.
package certificates
