package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/controllers/kubernetesservice"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

// A server on a wildcard address lists itself in the kubernetes Service under the host's
// default interface address, as kube-apiserver does without --advertise-address, and its
// serving certificate holds that address and the Service's cluster IP, the two addresses
// pods dial (conformance: the sample API server's pod talks to the API server through the
// kubernetes Service). The test then talks to the server at the listed address, as a pod's
// traffic arrives once the Service proxy has translated it.
func TestWildcardBindAdvertisesHostAddress(t *testing.T) {
	want, err := kubernetesservice.PublicAddress("", "0.0.0.0")
	if err != nil {
		t.Skipf("this machine has no default interface address: %v", err)
	}
	s, err := servertest.StartWith(t.TempDir(), nil, func(o *server.Options) {
		o.BindAddress = "0.0.0.0"
		o.ServiceClusterIPRange = "10.97.0.0/16"
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()

	// The kubernetes Service's endpoint: the host's address and the server's port.
	port := int32(s.Port)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, ss := range ep.Subsets {
			for _, a := range ss.Addresses {
				for _, p := range ss.Ports {
					if a.IP == want.String() && p.Port == port {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		ep, _ := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		t.Fatalf("kubernetes Endpoints never listed %s:%d: %+v", want, port, ep)
	}
	svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.97.0.1" {
		t.Fatalf("kubernetes Service cluster IP %s, want 10.97.0.1", svc.Spec.ClusterIP)
	}

	// The certificate verifies for both addresses, on a connection to the listed one.
	ca, err := os.ReadFile(cfg.CAFile)
	if err != nil && len(cfg.CAData) == 0 {
		t.Fatal(err)
	}
	if len(cfg.CAData) > 0 {
		ca = cfg.CAData
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	addr := net.JoinHostPort(want.String(), strconv.Itoa(s.Port))
	for _, name := range []string{want.String(), svc.Spec.ClusterIP} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: name})
		if err != nil {
			t.Fatalf("TLS to %s as %s: %v", addr, name, err)
		}
		c.Close()
	}

	// And the API answers there.
	listed := rest.CopyConfig(cfg)
	listed.Host = "https://" + addr
	if _, err := kubernetes.NewForConfigOrDie(listed).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("API at the listed address: %v", err)
	}
}
