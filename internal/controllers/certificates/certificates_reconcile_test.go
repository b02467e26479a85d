package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// csrPEM is a PEM certificate request for subject, signed by a new key.
func csrPEM(t testing.TB, subject pkix.Name) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func cond(typ certificatesv1.RequestConditionType, reason string) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: "m"}
}

func csr(signer string, request []byte, conds ...certificatesv1.CertificateSigningRequestCondition) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		Spec:   certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: request},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: conds},
	}
}

func TestRequestProblem(t *testing.T) {
	good := csrPEM(t, pkix.Name{CommonName: "alice"})
	block, _ := pem.Decode(good)
	tampered := append([]byte{}, block.Bytes...)
	tampered[len(tampered)-1] ^= 0x01 // the last byte of the ECDSA signature's s
	approved := cond(certificatesv1.CertificateApproved, "KubectlApprove")
	client := certificatesv1.KubeAPIServerClientSignerName
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want string // substring; "" means no problem
	}{
		{"approved and good", csr(client, good, approved), ""},
		{"approved garbage", csr(client, []byte("garbage"), approved), "PEM block type must be CERTIFICATE REQUEST"},
		{"approved, wrong PEM type", csr(client, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}), approved), "PEM block type"},
		{"approved, bad DER", csr(client, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}}), approved), "unable to parse"},
		{"approved, bad signature", csr(client, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), approved), "unable to verify"},
		{"kubelet signer garbage", csr(certificatesv1.KubeAPIServerClientKubeletSignerName, []byte("x"), approved), "PEM block"},
		{"not approved", csr(client, []byte("garbage")), ""},
		{"denied", csr(client, []byte("garbage"), cond(certificatesv1.CertificateDenied, "KubectlDeny")), ""},
		{"already failed", csr(client, []byte("garbage"), approved, cond(certificatesv1.CertificateFailed, "SignerValidationFailure")), ""},
		{"another signer's", csr("example.com/signer", []byte("garbage"), approved), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := requestProblem(tc.csr)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("requestProblem = %q, want %q", got, tc.want)
			}
		})
	}
	issued := csr(client, []byte("garbage"), approved)
	issued.Status.Certificate = []byte("cert")
	if got := requestProblem(issued); got != "" {
		t.Fatalf("an issued CSR has a problem: %q", got)
	}
}

func TestOutcome(t *testing.T) {
	client := certificatesv1.KubeAPIServerClientSignerName
	pending := csr(client, nil)
	approved := csr(client, nil, cond(certificatesv1.CertificateApproved, "A"))
	signed := approved.DeepCopy()
	signed.Status.Certificate = []byte("cert")
	failed := csr(client, nil, cond(certificatesv1.CertificateApproved, "A"), cond(certificatesv1.CertificateFailed, "SignerValidationFailure"))
	foreign := csr("example.com/x", nil)
	foreignSigned := foreign.DeepCopy()
	foreignSigned.Status.Certificate = []byte("cert")
	for _, tc := range []struct {
		name     string
		old, cur *certificatesv1.CertificateSigningRequest
		reason   string
		typ      string
	}{
		{"approved", pending, approved, "", ""},
		{"signed", approved, signed, ReasonSigned, corev1.EventTypeNormal},
		{"signed again (resync)", signed, signed, "", ""},
		{"failed", approved, failed, ReasonSigningFailed, corev1.EventTypeWarning},
		{"still failed", failed, failed, "", ""},
		{"another signer's certificate", foreign, foreignSigned, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, reason, note, ok := outcome(tc.old, tc.cur)
			if ok != (tc.reason != "") || reason != tc.reason || typ != tc.typ {
				t.Fatalf("outcome = %q %q %q %v, want %q %q", typ, reason, note, ok, tc.typ, tc.reason)
			}
			if reason == ReasonSigningFailed && !strings.Contains(note, "SignerValidationFailure") {
				t.Fatalf("note %q does not name the condition's reason", note)
			}
		})
	}
}
