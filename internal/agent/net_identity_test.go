package agent

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

	"kubeos.dev/kube/internal/rbac"
)

func csrPEM(t *testing.T, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCheckNetworkingCSR(t *testing.T) {
	good := x509.CertificateRequest{Subject: pkix.Name{CommonName: NetworkingUser("n1"), Organization: []string{rbac.NodeNetworkingGroup}}}
	mk := func(mut func(*certificatesv1.CertificateSigningRequest), tmpl x509.CertificateRequest) *certificatesv1.CertificateSigningRequest {
		csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientSignerName, Username: "system:node:n1",
			Groups: []string{"system:nodes", "system:authenticated"}, Usages: networkingUsages, Request: csrPEM(t, tmpl)}}
		if mut != nil {
			mut(csr)
		}
		return csr
	}
	other := good
	other.Subject.CommonName = NetworkingUser("n2")
	admin := good
	admin.Subject.Organization = []string{"system:masters"}
	extraOrg := good
	extraOrg.Subject.Organization = []string{rbac.NodeNetworkingGroup, "system:masters"}
	san := good
	san.DNSNames = []string{"n1"}
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want string // "" accepted; else a word of the refusal
	}{
		{"the node's own request", mk(nil, good), ""},
		{"key encipherment too", mk(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageKeyEncipherment)
		}, good), ""},
		{"another node's identity", mk(nil, other), "common name"},
		{"system:masters", mk(nil, admin), "organization"},
		{"an extra organization", mk(nil, extraOrg), "organization"},
		{"SANs", mk(nil, san), "alternative"},
		{"not a node", mk(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "alice"; c.Spec.Groups = nil }, good), "not a node"},
		{"node name without the group", mk(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Groups = []string{"system:authenticated"} }, good), "not a node"},
		{"kubelet signer", mk(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}, good), "signer"},
		{"server auth usage", mk(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}, good), "usage"},
		{"no client auth", mk(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
		}, good), "client auth"},
		{"garbage request", mk(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("nope") }, good), "PEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, err := CheckNetworkingCSR(tc.csr)
			switch {
			case tc.want == "" && (err != nil || node != "n1"):
				t.Errorf("refused: %v (node %q)", err, node)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err %v, want one about %q", err, tc.want)
			}
		})
	}
}
