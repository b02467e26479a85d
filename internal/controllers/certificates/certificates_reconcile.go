package certificates

import (
	"context"
	"fmt"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	capihelper "k8s.io/kubernetes/pkg/apis/certificates"
	upstream "k8s.io/kubernetes/pkg/controller/certificates"
)

// Reasons of the conditions and events this package writes itself.
const (
	// ReasonInvalidRequest is the Failed condition's reason on an approved CSR whose
	// request cannot be parsed or whose signature does not verify.
	ReasonInvalidRequest = "InvalidRequest"
	// ReasonSigned and ReasonSigningFailed are the events recorded on a CSR when it gets
	// its certificate or the Failed condition.
	ReasonSigned        = "Signed"
	ReasonSigningFailed = "SigningFailed"
)

// requestProblem says why an approved CSR for one of our signers can never be signed: its
// request is not a PEM "CERTIFICATE REQUEST", does not parse, or its signature does not
// verify. It is "" when there is no such problem, and for CSRs that are not ours to judge
// (another signer's, not approved, already failed or issued).
func requestProblem(csr *certificatesv1.CertificateSigningRequest) string {
	if len(csr.Status.Certificate) > 0 || !slices.Contains(signerNames, csr.Spec.SignerName) ||
		!upstream.IsCertificateRequestApproved(csr) || upstream.HasTrueCondition(csr, certificatesv1.CertificateFailed) {
		return ""
	}
	cr, err := capihelper.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Sprintf("unable to parse the certificate request: %v", err)
	}
	if err := cr.CheckSignature(); err != nil {
		return fmt.Sprintf("unable to verify the certificate request's signature: %v", err)
	}
	return ""
}

// checkRequest marks csr (a copy the caller owns) Failed when requestProblem finds one, so
// that upstream's signer, which would retry it forever, leaves it alone.
func checkRequest(ctx context.Context, cs kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest, now func() time.Time) error {
	problem := requestProblem(csr)
	if problem == "" {
		return nil
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:           certificatesv1.CertificateFailed,
		Status:         corev1.ConditionTrue,
		Reason:         ReasonInvalidRequest,
		Message:        problem,
		LastUpdateTime: metav1.NewTime(now()),
	})
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("adding the Failed condition to csr %s: %w", csr.Name, err)
	}
	return nil
}

// outcome is the event a change of a CSR for one of our signers deserves: its certificate appeared, or its Failed
// condition did. ok is false when the change deserves none.
func outcome(old, cur *certificatesv1.CertificateSigningRequest) (eventType, reason, note string, ok bool) {
	if !slices.Contains(signerNames, cur.Spec.SignerName) {
		return "", "", "", false
	}
	if len(old.Status.Certificate) == 0 && len(cur.Status.Certificate) > 0 {
		return corev1.EventTypeNormal, ReasonSigned, fmt.Sprintf("Signed by the Kube CA for %s", cur.Spec.SignerName), true
	}
	if !upstream.HasTrueCondition(old, certificatesv1.CertificateFailed) && upstream.HasTrueCondition(cur, certificatesv1.CertificateFailed) {
		for _, c := range cur.Status.Conditions {
			if c.Type == certificatesv1.CertificateFailed {
				return corev1.EventTypeWarning, ReasonSigningFailed, fmt.Sprintf("%s: %s", c.Reason, c.Message), true
			}
		}
	}
	return "", "", "", false
}

// recordOutcome records the event outcome finds, if any.
func recordOutcome(rec events.EventRecorder, old, cur *certificatesv1.CertificateSigningRequest) {
	if typ, reason, note, ok := outcome(old, cur); ok {
		rec.Eventf(cur, nil, typ, reason, "Sign", "%s", note)
	}
}
