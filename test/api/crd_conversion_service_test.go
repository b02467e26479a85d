package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestWebhookConversionService: a conversion webhook named by clientConfig.service (the
// e2e suite's CustomResourceConversionWebhook tests register theirs so) is called at a
// ready endpoint of the Service, the Service port mapped to the endpoint's, with the
// service's path, its certificate verified as <service>.<namespace>.svc. Until the Service
// has a ready endpoint, reads in the other version fail with a Status that says so; the
// endpoint is looked up again on the next request (not remembered from the first).
func TestWebhookConversionService(t *testing.T) {
	crdSuite.Need(t)
	ctx := ctxT(t, 90*time.Second)
	ext, dyn, cfg := clients(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns, svcName, group = "default", "conv-hook", "svc.conv.example.com"
	// Endpoints may not be loopback addresses: the webhook listens on one of the machine's
	// global unicast addresses, with a certificate for conv-hook.default.svc.
	ip := globalIPv4(t)
	hook := &conversionWebhook{}
	hook.mode.Store("ok")
	caPEM, cert := serviceTLS(t, svcName+"."+ns+".svc")
	ts := httptest.NewUnstartedServer(hook)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener.Close()
	ts.Listener = ln
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(p)

	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 9443, TargetPort: intstr.FromInt32(int32(port))}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Services(ns).Delete(ctx, svcName, metav1.DeleteOptions{}) })

	crd := crdFromJSON(t, fmt.Sprintf(hostsCRD, group, group, `["v1"]`, "https://unused.invalid", b64(caPEM)))
	crd.Spec.Conversion.Webhook.ClientConfig.URL = nil
	crd.Spec.Conversion.Webhook.ClientConfig.Service = &apiextensionsv1.ServiceReference{Namespace: ns, Name: svcName, Port: ptr.To(int32(9443)), Path: ptr.To("/convert")}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "hosts."+group, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	v1alpha1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "hosts"}).Namespace(ns)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "hosts"}).Namespace(ns)
	if _, err := v1alpha1.Create(ctx, host(group+"/v1alpha1", "a", map[string]any{"host": "db1", "port": int64(5432)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No endpoint yet: the read in v1 fails, and says why (once the server's service
	// resolver has synced: early in the package it answers that it has not).
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		_, err := v1.Get(ctx, "a", metav1.GetOptions{})
		if err == nil || !strings.Contains(err.Error(), `no endpoints available for service "conv-hook"`) {
			return fmt.Errorf("a read in v1 without a webhook endpoint: %v", err)
		}
		return nil
	})

	ready := true
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svcName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.DiscoveryV1().EndpointSlices(ns).Delete(ctx, svcName+"-1", metav1.DeleteOptions{}) })
	var got *unstructured.Unstructured
	deadline := time.Now().Add(30 * time.Second) // the server's Service and EndpointSlice informers
	for {
		if got, err = v1.Get(ctx, "a", metav1.GetOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("a read in v1 through the webhook Service: %v", err)
	}
	if addr, _, _ := unstructured.NestedString(got.Object, "spec", "address"); addr != "db1:5432" {
		b, _ := json.Marshal(got.Object)
		t.Fatalf("a in v1: %s", b)
	}
	if hook.calls.Load() == 0 {
		t.Fatal("the webhook behind the Service was never called")
	}
}

// serviceTLS makes a CA and a serving certificate for the DNS name.
func serviceTLS(t *testing.T, dnsName string) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-service-webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{dnsName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// globalIPv4 is a global unicast IPv4 address of this machine (skips the test without one).
func globalIPv4(t *testing.T) string {
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
