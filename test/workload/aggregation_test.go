package workload

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kubeos.dev/kube/internal/server/servertest"
)

// hostIPv4 is an address of this machine that an EndpointSlice may hold (not loopback).
func hostIPv4(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this machine for the extension server")
	return ""
}

// wardle is a minimal extension API server: it trusts only the front-proxy CA Kube
// publishes, records the identity headers, and serves flunders.
type wardle struct {
	mu    sync.Mutex
	users []string
}

func (wd *wardle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "front-proxy-client" {
		http.Error(w, "not the front proxy", http.StatusUnauthorized)
		return
	}
	wd.mu.Lock()
	wd.users = append(wd.users, r.Header.Get("X-Remote-User")+" "+strings.Join(r.Header.Values("X-Remote-Group"), ","))
	wd.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/wardle.example.com/v1alpha1":
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "wardle.example.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "list"}}}})
	case "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders":
		fmt.Fprint(w, `{"kind":"FlunderList","apiVersion":"wardle.example.com/v1alpha1","metadata":{},"items":[`+
			`{"kind":"Flunder","apiVersion":"wardle.example.com/v1alpha1","metadata":{"name":"flunder-one","namespace":"default","creationTimestamp":"2026-12-01T00:00:00Z"}}]}`)
	default:
		http.NotFound(w, r)
	}
}

func (wd *wardle) seen() []string {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	return append([]string(nil), wd.users...)
}

// TestAggregation: an APIService backed by a Service is proxied to its extension server
// over TLS with the front-proxy client certificate and the caller's identity in the
// X-Remote-* headers; it becomes Available once the server's discovery answers, its group
// appears in discovery (kubectl api-resources, kubectl get), a caller Kube does not
// authorise never reaches it, and losing its endpoints makes it unavailable with a 503.
func TestAggregation(t *testing.T) {
	ctx := ctxT(t)
	cs := clientset(t)
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["requestheader-allowed-names"] != `["front-proxy-client"]` || cm.Data["requestheader-username-headers"] != `["X-Remote-User"]` {
		t.Fatalf("requestheader configuration %v", cm.Data)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		t.Fatal("no requestheader-client-ca-file")
	}
	ip := hostIPv4(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	wd := &wardle{}
	ext := httptest.NewUnstartedServer(wd)
	ext.Listener = ln
	ext.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	ext.StartTLS()
	defer ext.Close()
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	makeNS(t, cs, "wardle")
	if _, err := cs.CoreV1().Services("wardle").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("https"), Port: &port}}}
	if _, err := cs.DiscoveryV1().EndpointSlices("wardle").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := aggregatorclient.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	api := agg.ApiregistrationV1().APIServices()
	svcPort := int32(443)
	if _, err := api.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", InsecureSkipTLSVerify: true,
			GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service: &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api", Port: &svcPort}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(ctx, "v1alpha1.wardle.example.com", metav1.DeleteOptions{}) })
	condition := func(status, reason string) func() error {
		return func() error {
			a, err := api.Get(ctx, "v1alpha1.wardle.example.com", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range a.Status.Conditions {
				if c.Type == apiregistrationv1.Available && string(c.Status) == status && c.Reason == reason {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", a.Status.Conditions)
		}
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, condition("True", "Passed"))

	k := newKubectl(t, "1.33")
	servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
		out, err := k.run("", "api-resources", "--api-group=wardle.example.com")
		if err != nil || !strings.Contains(out, "flunders") {
			return fmt.Errorf("api-resources: %v\n%s", err, out)
		}
		return nil
	})
	for _, v := range []string{"1.33", "1.27"} {
		out := newKubectl(t, v).ok("", "get", "flunders", "-n", "default")
		if !strings.Contains(out, "flunder-one") {
			t.Fatalf("kubectl %s get flunders:\n%s", v, out)
		}
	}
	if got := strings.Join(wd.seen(), "\n"); !strings.Contains(got, "kube-admin system:masters") || !strings.Contains(got, "system:kube-aggregator system:masters") {
		t.Errorf("identities the extension server saw:\n%s", got)
	}

	// A caller Kube does not authorise is refused by Kube and never reaches the server.
	k.fails("", []string{"forbidden"}, "get", "flunders", "-n", "default", "--as", "nobody")
	for _, u := range wd.seen() {
		if strings.HasPrefix(u, "nobody") {
			t.Fatalf("an unauthorised request reached the extension server: %q", u)
		}
	}

	// Without endpoints: not available, and requests answer 503.
	if err := cs.DiscoveryV1().EndpointSlices("wardle").Delete(ctx, "api-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, condition("False", "MissingEndpoints"))
	res := cs.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders").Do(ctx)
	var code int
	res.StatusCode(&code)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("without endpoints: %d %v", code, res.Error())
	}
}
