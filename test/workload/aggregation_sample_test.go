package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/server/servertest"
)

// sampleServer is upstream's k8s.io/sample-apiserver running as a process, with an etcd of
// its own, delegating authentication and authorization to Kube and trusting Kube's
// front-proxy CA from extension-apiserver-authentication, behind the Service api of its
// namespace in Kube (an EndpointSlice names its address).
type sampleServer struct {
	ns   string
	ip   string
	port int
}

// sampleAPIServerBinary is sample-apiserver (a tool of go.mod) as the go command builds
// and caches it: the first build takes minutes on a cold cache, later ones only look it up.
func sampleAPIServerBinary(t testing.TB, ctx context.Context) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "go", "tool", "-n", "k8s.io/sample-apiserver").Output()
	if err != nil {
		t.Fatalf("go tool -n k8s.io/sample-apiserver: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("go tool -n k8s.io/sample-apiserver printed %q: %v", bin, err)
	}
	return bin
}

// startSampleAPIServer starts sample-apiserver and its etcd (both stopped when the test
// ends; its log is printed if the test failed) and creates namespace ns with the Service
// api in front of it.
func startSampleAPIServer(t testing.TB, ctx context.Context, ns string) *sampleServer {
	t.Helper()
	bin := sampleAPIServerBinary(t, ctx)
	dir := t.TempDir()
	etcdPort := freePort(t, "127.0.0.1")
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: filepath.Join(dir, "etcd"),
		ClientURLs: []string{fmt.Sprintf("http://127.0.0.1:%d", etcdPort)}, HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { member.Close() })

	s := &sampleServer{ns: ns, ip: hostIPv4(t)}
	s.port = freePort(t, s.ip)
	log, err := os.Create(filepath.Join(dir, "sample-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(runCtx, bin,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--bind-address", s.ip, "--secure-port", fmt.Sprint(s.port), "--cert-dir", filepath.Join(dir, "certs"),
		"--kubeconfig", srv.Kubeconfig, "--authentication-kubeconfig", srv.Kubeconfig, "--authorization-kubeconfig", srv.Kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		stop()
		log.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("sample-apiserver log:\n%s", b)
		}
	})

	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(s.port))}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Services(ns).Delete(context.Background(), "api", metav1.DeleteOptions{}) })
	ready, p := true, int32(s.port)
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{s.ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("https"), Port: &p}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), "api-1", metav1.DeleteOptions{})
	})
	return s
}

// register creates an APIService for each version of wardle.example.com (v1alpha1 and
// v1beta1: sample-apiserver serves both) naming the server's Service, deleted when the
// test ends, and waits until every one is Available.
func (s *sampleServer) register(t testing.TB, ctx context.Context, versions ...string) {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := agg.ApiregistrationV1().APIServices()
	svcPort := int32(443)
	for _, v := range versions {
		name := v + ".wardle.example.com"
		if _, err := api.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: v, InsecureSkipTLSVerify: true,
				GroupPriorityMinimum: 2000, VersionPriority: map[string]int32{"v1alpha1": 10, "v1beta1": 20}[v],
				Service: &apiregistrationv1.ServiceReference{Namespace: s.ns, Name: "api", Port: &svcPort}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	servertest.Eventually(t, 120*time.Second, 500*time.Millisecond, func() error {
		for _, v := range versions {
			a, err := api.Get(ctx, v+".wardle.example.com", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ok := false
			for _, c := range a.Status.Conditions {
				ok = ok || (c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue)
			}
			if !ok {
				return fmt.Errorf("%s: %+v", a.Name, a.Status.Conditions)
			}
		}
		return nil
	})
}

// directConfig is the admin client configuration pointed at the sample-apiserver itself
// (it trusts Kube's client CA; its serving certificate is self-signed).
func (s *sampleServer) directConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = fmt.Sprintf("https://%s:%d", s.ip, s.port)
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.Insecure = nil, "", true
	return cfg
}
