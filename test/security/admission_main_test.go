package security

// The admission suite tests admission webhooks, ValidatingAdmissionPolicy, the audit log and
// encryption at rest against its own in-process server started with --audit-policy-file,
// --audit-log-path, --encryption-provider-config and --admission-client-cert/key, with real
// TLS webhook servers and kubectl 1.33.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var (
	admissionSrv *servertest.Server
	cs           *kubernetes.Clientset
	dyn          dynamic.Interface
	dataDir      string
	auditPath    string
	encPath      string
	// webhookCA signs the webhook servers' certificates; otherCA signs nothing they use.
	webhookCA, otherCA, clientCA *testCA
	// admissionClientCN is the CN of the certificate Kube presents to webhooks.
	admissionClientCN = "kube-admission-client"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: None
  users: ["system:kube-admission"]
- level: RequestResponse
  namespaces: ["audit-rr"]
- level: Request
  resources:
  - group: ""
    resources: ["configmaps"]
  namespaces: ["wh-kubectl"]
- level: Metadata
`

// Two 32-byte keys, base64.
const (
	key1 = "c2VjcmV0IGlzIHNlY3VyZSwgSSB0aGluayBzbyBzb28="
	key2 = "YW5vdGhlciBzZWNyZXQsIGV2ZW4gbW9yZSBzZWN1cmU="
)

func encryptionConfig(keys string) string {
	return `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
` + keys + `  - identity: {}
`
}

var admissionSuite = servertest.NewFixture("admission", func(fx *servertest.Fixture) error {
	var err error
	dataDir, err = servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dataDir) })
	if webhookCA, err = newCA("webhook-ca"); err == nil {
		if otherCA, err = newCA("other-ca"); err == nil {
			clientCA, err = newCA("admission-client-ca")
		}
	}
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := clientCA.issue(admissionClientCN, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(dataDir, "admission-client.crt"), filepath.Join(dataDir, "admission-client.key")
	policyFile := filepath.Join(dataDir, "audit-policy.yaml")
	auditPath = filepath.Join(dataDir, "audit", "audit.log")
	encPath = filepath.Join(dataDir, "encryption.yaml")
	for f, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, policyFile: []byte(auditPolicy),
		encPath: []byte(encryptionConfig("      - {name: key1, secret: " + key1 + "}\n"))} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
	}
	admissionSrv, err = servertest.StartWith(dataDir, nil, func(o *server.Options) {
		o.AuditPolicyFile, o.AuditLogPath = policyFile, auditPath
		o.AuditLogMaxSize, o.AuditLogMaxBackup = 50, 2
		o.EncryptionProviderConfig = encPath
		o.AdmissionClientCertFile, o.AdmissionClientKeyFile = certFile, keyFile
	})
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { admissionSrv.Stop() })
	if err := connect(); err != nil {
		return err
	}
	return nil
})

// connect makes the clients (again after a restart).
func connect() error {
	cfg, err := admissionSrv.Config()
	if err != nil {
		return err
	}
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	dyn, err = dynamic.NewForConfig(cfg)
	return err
}

// testCA is a certificate authority made for the test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(cn string) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a leaf certificate for cn (and ips).
func (ca *testCA) issue(cn string, ips []net.IP, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// serverTLS is a serving configuration for 127.0.0.1 signed by ca.
func (ca *testCA) serverTLS() (*tls.Config, error) {
	c, k, err := ca.issue("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}, nil
}
