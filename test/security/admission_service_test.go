package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serverTLSForService is a serving configuration signed by ca for the DNS name a webhook
// Service is verified as, <service>.<namespace>.svc (what the e2e suite's webhooks carry).
func (ca *testCA) serverTLSForService(ns, svc string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	name := svc + "." + ns + ".svc"
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}, nil
}

// TestWebhookService: a webhook named by clientConfig.service (no url) is called at a
// ready endpoint of that Service, the Service port mapped to the endpoint's port, with
// clientConfig.service.path, and its certificate verified as <service>.<namespace>.svc, as
// kube-apiserver with endpoint routing does (the e2e suite's AdmissionWebhook tests
// register their webhooks this way). Without a ready endpoint the call fails (failurePolicy
// Fail refuses the request); once the endpoint is ready, the webhook decides.
func TestWebhookService(t *testing.T) {
	admissionSuite.Need(t)
	ctx := context.Background()
	const ns, svcName = "wh-svc", "hook"
	testNamespace(t, ns)
	// Endpoints may not be loopback addresses (EndpointSlice validation): the webhook
	// listens on one of the machine's own global unicast addresses.
	ip := hostIP(t)
	ws := &webhookServer{}
	ws.Server = httptest.NewUnstartedServer(http.HandlerFunc(ws.serve))
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	ws.Listener.Close()
	ws.Listener = ln
	tc, err := webhookCA.serverTLSForService(ns, svcName)
	if err != nil {
		t.Fatal(err)
	}
	ws.TLS = tc
	ws.StartTLS()
	t.Cleanup(ws.Close)
	_, portStr, _ := net.SplitHostPort(ws.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	// A Service without a selector, its port 8443 named "https", and (later) an
	// EndpointSlice that puts the webhook server behind it.
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443, TargetPort: intstr.FromInt32(int32(port))}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hook := validatingHook("svc.kube.test", "", webhookCA.certPEM, ns, admissionregistrationv1.Fail, 5)
	hook.ClientConfig = admissionregistrationv1.WebhookClientConfig{CABundle: webhookCA.certPEM,
		Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svcName, Port: ptr(int32(8443)), Path: ptr("/validate")}}
	createValidating(t, "svc-hook", hook)
	refusedWith(t, ns, "", `failed calling webhook "svc.kube.test": failed to call webhook: service wh-svc/hook:8443: no endpoints available for service "hook"`)

	ready := true
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svcName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(port))}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The webhook at the endpoint decides: it refuses forbidden-name, admits the rest.
	refusedWith(t, ns, "forbidden-name", "the name forbidden-name is not allowed")
	if _, err := createCM(ns, "allowed"); err != nil {
		t.Fatalf("a name the webhook allows: %v", err)
	}
	if ws.calls == 0 {
		t.Fatal("the webhook behind the Service was never called")
	}

	// A certificate that does not name <service>.<namespace>.svc is not trusted.
	other := httptest.NewUnstartedServer(http.HandlerFunc(ws.serve))
	oln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	other.Listener.Close()
	other.Listener = oln
	if other.TLS, err = webhookCA.serverTLSForService(ns, "another"); err != nil {
		t.Fatal(err)
	}
	other.StartTLS()
	t.Cleanup(other.Close)
	_, otherPort, _ := net.SplitHostPort(oln.Addr().String())
	op, _ := strconv.Atoi(otherPort)
	sl, err := cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, svcName+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Ports[0].Port = ptr(int32(op))
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = refusedWith(t, ns, "", `failed calling webhook "svc.kube.test"`)
	if !strings.Contains(err.Error(), "hook.wh-svc.svc") {
		t.Fatalf("a certificate for another name: %v", err)
	}
}

// hostIP is a global unicast IPv4 address of this machine (skips the test without one).
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no global unicast IPv4 address on this machine")
	return ""
}
