package agent

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

// clientCert is the agent's current client certificate in its data directory.
func clientCert(dataDir string) (*x509.Certificate, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "pki", "kubelet-client-current.pem"))
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("no certificate in kubelet-client-current.pem")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// TestCertificateRotation: an agent joined with a bootstrap token, whose node client
// certificate lives two minutes (the server's --cluster-signing-duration here), renews it
// before it expires with a CSR of its own (approved as selfnodeclient), and is still
// working after the first certificate expired: its Lease is renewed and a new pod runs.
func TestCertificateRotation(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	bin := servertest.BuildKube(t, t.TempDir())
	ctx := ctxT(t, 6*time.Minute)
	out, err := exec.Command(bin, "token", "create", "--kubeconfig", srv.Kubeconfig, "--ttl", "10m").CombinedOutput()
	if err != nil {
		t.Fatalf("kube token create: %v %s", err, out)
	}
	node := nodeName + "-rot"
	cidr, br := agentSlot(4)
	a := startAgentProcessWith(t, node, cidr, br, []string{"--server", srv.URL, "--token", strings.TrimSpace(string(out)),
		"--certificate-authority", filepath.Join(srv.DataDir, "pki", "ca.crt")})
	waitNode(t, cs, node, 2*time.Minute, "Ready", nodeReady)
	dataDir := filepath.Join(a.dataDir, "d")
	first, err := clientCert(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Subject.CommonName != "system:node:"+node || first.NotAfter.Sub(time.Now()) > 3*time.Minute {
		t.Fatalf("first client certificate %s valid until %v", first.Subject, first.NotAfter)
	}
	// Renewed before the first one expires.
	servertest.Eventually(t, time.Until(first.NotAfter), time.Second, func() error {
		c, err := clientCert(dataDir)
		if err != nil {
			return err
		}
		if c.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return fmt.Errorf("client certificate not renewed yet (expires %v)", first.NotAfter)
		}
		return nil
	})
	csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self := 0
	for _, c := range csrs.Items {
		if c.Spec.Username == "system:node:"+node && len(c.Status.Certificate) > 0 {
			self++
		}
	}
	if self == 0 {
		t.Errorf("no CSR signed for system:node:%s itself (renewal)", node)
	}
	// After the first certificate expired, the node still heartbeats and runs pods.
	servertest.Eventually(t, 2*time.Minute, time.Second, func() error {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(first.NotAfter.Add(time.Second)) {
			return fmt.Errorf("lease renewed at %v, waiting for a renewal after the first certificate's expiry %v", l.Spec.RenewTime, first.NotAfter)
		}
		return nil
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, busyboxPod("after", node, "exec sleep 100000"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "after", 90*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}
