package certificates_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/controllers/certificates"
	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server/servertest"
)

var srv *servertest.Server

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// userConfig is a client configuration for user, with a client certificate minted by the
// server's CA as `kube certs user` mints it.
func userConfig(t *testing.T, user string, groups ...string) *rest.Config {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClientCert(user, groups, 0)
	if err != nil {
		t.Fatal(err)
	}
	return certConfig(certPEM, keyPEM)
}

func certConfig(certPEM, keyPEM []byte) *rest.Config {
	ca, _ := os.ReadFile(filepath.Join(srv.DataDir, "pki", pki.CACertName))
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: certPEM, KeyData: keyPEM}, QPS: -1}
}

// request is a certificate request for subject with a new key, and the key in PEM.
func request(t *testing.T, subject pkix.Name) (csrPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func createCSR(t *testing.T, cs kubernetes.Interface, name, signer string, req []byte, expiration *int32, usages ...certificatesv1.KeyUsage) {
	t.Helper()
	_, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: req, Usages: usages, ExpirationSeconds: expiration},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create CSR %s: %v", name, err)
	}
}

// kubectl runs kubectl 1.33, or the version given first ("1.27") as the admin.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	version := "1.33"
	if len(args) > 0 && strings.HasPrefix(args[0], "1.") {
		version, args = args[0], args[1:]
	}
	bin, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := servertest.RunKubectl(bin, t.TempDir(), srv.Kubeconfig, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// waitFor polls the CSR until done says it is in the wanted state.
func waitFor(t *testing.T, cs kubernetes.Interface, name string, done func(*certificatesv1.CertificateSigningRequest) error) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var last *certificatesv1.CertificateSigningRequest
	servertest.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = csr
		return done(csr)
	})
	return last
}

func issued(csr *certificatesv1.CertificateSigningRequest) error {
	if len(csr.Status.Certificate) == 0 {
		return fmt.Errorf("no certificate yet; conditions %+v", csr.Status.Conditions)
	}
	return nil
}

func condition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == typ {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

// verify parses the issued certificate and checks that it chains to the server's CA for
// client authentication.
func verify(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("status.certificate is not a PEM certificate: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.CA)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the certificate does not chain to the Kube CA: %v", err)
	}
	return cert
}

// TestApproveSigns: a CSR for kube-apiserver-client approved with kubectl gets a
// certificate signed by the Kube CA, with the request's subject and the requested
// lifetime, and the certificate authenticates as that subject.
func TestApproveSigns(t *testing.T) {
	cs := admin(t)
	req, key := request(t, pkix.Name{CommonName: "carol", Organization: []string{"dev", "ops"}})
	before := time.Now().Truncate(time.Second)
	createCSR(t, cs, "carol", certificatesv1.KubeAPIServerClientSignerName, req, ptr.To[int32](3600), certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature)
	if out := kubectl(t, "certificate", "approve", "carol"); !strings.Contains(out, "approved") {
		t.Fatalf("kubectl certificate approve printed %q", out)
	}
	csr := waitFor(t, cs, "carol", issued)
	after := time.Now()
	if c := condition(csr, certificatesv1.CertificateApproved); c == nil || c.Reason != "KubectlApprove" {
		t.Fatalf("Approved condition %+v", c)
	}
	cert := verify(t, csr.Status.Certificate)
	if cert.Subject.CommonName != "carol" || !slices.Equal(cert.Subject.Organization, []string{"dev", "ops"}) {
		t.Fatalf("subject %v, want CN=carol O=dev,ops", cert.Subject)
	}
	// expirationSeconds 3600 is below upstream's "short" threshold (8 h): not backdated
	// at the end.
	if cert.NotAfter.Before(before.Add(time.Hour)) || cert.NotAfter.After(after.Add(time.Hour)) {
		t.Fatalf("NotAfter %v, want an hour after the signing (between %v and %v)", cert.NotAfter, before.Add(time.Hour), after.Add(time.Hour))
	}
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		evs, err := cs.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "CertificateSigningRequest" && e.Regarding.Name == "carol" && e.Reason == "Signed" {
				return nil
			}
		}
		return fmt.Errorf("no Signed event for csr carol among %d events", len(evs.Items))
	})
	who, err := kubernetes.NewForConfigOrDie(certConfig(csr.Status.Certificate, key)).AuthenticationV1().SelfSubjectReviews().
		Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami with the issued certificate: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != "carol" || !slices.Contains(u.Groups, "dev") || !slices.Contains(u.Groups, "ops") {
		t.Fatalf("the issued certificate authenticates as %+v", u)
	}
}

// TestElected: the controller group runs under its Lease.
func TestElected(t *testing.T) {
	cs := admin(t)
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-"+certificates.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease %s has no holder", l.Name)
		}
		return nil
	})
}

// TestDefaultDuration: without expirationSeconds the certificate lives as long as
// --cluster-signing-duration allows (one year, backdated five minutes as upstream).
func TestDefaultDuration(t *testing.T) {
	cs := admin(t)
	req, _ := request(t, pkix.Name{CommonName: "dave"})
	before := time.Now().Truncate(time.Second)
	createCSR(t, cs, "dave", certificatesv1.KubeAPIServerClientSignerName, req, nil, certificatesv1.UsageClientAuth)
	if out := kubectl(t, "1.27", "certificate", "approve", "dave"); !strings.Contains(out, "approved") {
		t.Fatalf("kubectl 1.27 certificate approve printed %q", out)
	}
	cert := verify(t, waitFor(t, cs, "dave", issued).Status.Certificate)
	after := time.Now()
	year := 365*24*time.Hour - 5*time.Minute
	if cert.NotAfter.Before(before.Add(year)) || cert.NotAfter.After(after.Add(year)) {
		t.Fatalf("NotAfter %v, want one year less five minutes after the signing", cert.NotAfter)
	}
}

// TestDeniedNeverSigned: a denied CSR gets no certificate, while a CSR approved after it
// does.
func TestDeniedNeverSigned(t *testing.T) {
	cs := admin(t)
	req, _ := request(t, pkix.Name{CommonName: "mallory"})
	createCSR(t, cs, "mallory", certificatesv1.KubeAPIServerClientSignerName, req, nil, certificatesv1.UsageClientAuth)
	kubectl(t, "certificate", "deny", "mallory")
	req2, _ := request(t, pkix.Name{CommonName: "erin"})
	createCSR(t, cs, "erin", certificatesv1.KubeAPIServerClientSignerName, req2, nil, certificatesv1.UsageClientAuth)
	kubectl(t, "certificate", "approve", "erin")
	waitFor(t, cs, "erin", issued)
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "mallory", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(csr.Status.Certificate) > 0 || condition(csr, certificatesv1.CertificateDenied) == nil {
		t.Fatalf("denied CSR: certificate %q, conditions %+v", csr.Status.Certificate, csr.Status.Conditions)
	}
	// Approving a denied CSR is refused (upstream's approval validation).
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(context.Background(), "mallory", csr, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("approving a denied CSR: %v, want 422 Invalid", err)
	}
}

// TestSignerRefuses: an approved CSR the signer may not sign (a kubelet client certificate
// for a subject that is not a node) gets the Failed condition and no certificate.
func TestSignerRefuses(t *testing.T) {
	cs := admin(t)
	req, _ := request(t, pkix.Name{CommonName: "frank", Organization: []string{"system:nodes"}})
	createCSR(t, cs, "frank", certificatesv1.KubeAPIServerClientKubeletSignerName, req, nil, certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature)
	kubectl(t, "certificate", "approve", "frank")
	csr := waitFor(t, cs, "frank", func(csr *certificatesv1.CertificateSigningRequest) error {
		if condition(csr, certificatesv1.CertificateFailed) == nil {
			return fmt.Errorf("not failed yet: %+v", csr.Status.Conditions)
		}
		return nil
	})
	if c := condition(csr, certificatesv1.CertificateFailed); c.Reason != "SignerValidationFailure" || !strings.Contains(c.Message, "system:node:") {
		t.Fatalf("Failed condition %+v", c)
	}
	if len(csr.Status.Certificate) > 0 {
		t.Fatal("a refused CSR was signed")
	}
	// A bad usage for kube-apiserver-client fails the same way.
	req2, _ := request(t, pkix.Name{CommonName: "grace"})
	createCSR(t, cs, "grace", certificatesv1.KubeAPIServerClientSignerName, req2, nil, certificatesv1.UsageServerAuth)
	kubectl(t, "certificate", "approve", "grace")
	waitFor(t, cs, "grace", func(csr *certificatesv1.CertificateSigningRequest) error {
		if c := condition(csr, certificatesv1.CertificateFailed); c == nil || c.Reason != "SignerValidationFailure" || len(csr.Status.Certificate) > 0 {
			return fmt.Errorf("conditions %+v", csr.Status.Conditions)
		}
		return nil
	})
}

// TestGarbageRequest: a CSR whose request is not a certificate request is refused at
// create with 422, as kube-apiserver refuses it; the server and controller stay up.
func TestGarbageRequest(t *testing.T) {
	cs := admin(t)
	for _, req := range [][]byte{[]byte("garbage"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x03, 1, 2, 3}})} {
		_, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "garbage-"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeAPIServerClientSignerName, Request: req, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create with request %q: %v, want 422 Invalid", req, err)
		}
	}
	// Still signing.
	req, _ := request(t, pkix.Name{CommonName: "heidi"})
	createCSR(t, cs, "heidi", certificatesv1.KubeAPIServerClientSignerName, req, nil, certificatesv1.UsageClientAuth)
	kubectl(t, "certificate", "approve", "heidi")
	waitFor(t, cs, "heidi", issued)
}

// TestNodeClientAutoApproved: a node client CSR from a bootstrap identity
// (system:bootstrappers) is approved by the approver, signed, and the certificate
// authenticates as the node, which the Node authorizer then lets read its own Node only.
// The same CSR from a user without the nodeclient permission stays pending.
func TestNodeClientAutoApproved(t *testing.T) {
	cs := admin(t)
	nodeSubject := pkix.Name{CommonName: "system:node:boot-1", Organization: []string{"system:nodes"}}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

	alice := kubernetes.NewForConfigOrDie(userConfig(t, "alice", "dev"))
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(context.Background(), rbacBinding("alice-csr", "system:node-bootstrapper", "alice"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		req, _ := request(t, nodeSubject)
		return createCSROnce(alice, "alice-node", certificatesv1.KubeAPIServerClientKubeletSignerName, req, usages)
	})

	boot := kubernetes.NewForConfigOrDie(userConfig(t, "system:bootstrap:abcdef", "system:bootstrappers"))
	req, key := request(t, nodeSubject)
	createCSR(t, boot, "boot-1", certificatesv1.KubeAPIServerClientKubeletSignerName, req, nil, usages...)
	csr := waitFor(t, boot, "boot-1", issued)
	if c := condition(csr, certificatesv1.CertificateApproved); c == nil || c.Reason != "AutoApproved" {
		t.Fatalf("Approved condition %+v", c)
	}
	if csr.Spec.Username != "system:bootstrap:abcdef" {
		t.Fatalf("spec.username %q: the server did not record the requester", csr.Spec.Username)
	}
	cert := verify(t, csr.Status.Certificate)
	if cert.Subject.CommonName != "system:node:boot-1" {
		t.Fatalf("subject %v", cert.Subject)
	}
	node := kubernetes.NewForConfigOrDie(certConfig(csr.Status.Certificate, key))
	// Authorized for its own Node (which does not exist yet: 404, not 403) ...
	if _, err := node.CoreV1().Nodes().Get(context.Background(), "boot-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("node boot-1 reads its own Node: %v, want NotFound", err)
	}
	// ... and not for another's.
	if _, err := node.CoreV1().Nodes().Get(context.Background(), "boot-2", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node boot-1 reads node boot-2: %v, want Forbidden", err)
	}

	got, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "alice-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || len(got.Status.Certificate) != 0 {
		t.Fatalf("alice's node client CSR was acted on: %+v", got.Status)
	}
}

func createCSROnce(cs kubernetes.Interface, name, signer string, req []byte, usages []certificatesv1.KeyUsage) error {
	_, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: req, Usages: usages},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return errors.New("RBAC has not seen the binding yet: " + err.Error())
	}
	return err
}

func rbacBinding(name, role, user string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}
