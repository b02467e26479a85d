package workload

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/server/servertest"
)

// TestSampleAPIServer: upstream's k8s.io/sample-apiserver (built from the module, a tool of
// go.mod), with an etcd of its own, delegating authentication and authorization to Kube and
// trusting Kube's front-proxy CA from extension-apiserver-authentication, is registered
// through an APIService; its flunders and fischers then work through Kube with kubectl 1.27
// and 1.33, its BanFlunder admission included.
func TestSampleAPIServer(t *testing.T) {
	// Building sample-apiserver takes minutes on a cold cache: more than ctxT's minute.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sample-apiserver")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "k8s.io/sample-apiserver").CombinedOutput(); err != nil {
		t.Fatalf("go build k8s.io/sample-apiserver: %v\n%s", err, out)
	}
	etcdPort := freePort(t, "127.0.0.1")
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: filepath.Join(dir, "etcd"),
		ClientURLs: []string{fmt.Sprintf("http://127.0.0.1:%d", etcdPort)}, HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()

	ip := hostIPv4(t)
	port := freePort(t, ip)
	log, err := os.Create(filepath.Join(dir, "sample-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	runCtx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(runCtx, bin,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--bind-address", ip, "--secure-port", fmt.Sprint(port), "--cert-dir", filepath.Join(dir, "certs"),
		"--kubeconfig", srv.Kubeconfig, "--authentication-kubeconfig", srv.Kubeconfig, "--authorization-kubeconfig", srv.Kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("sample-apiserver log:\n%s", b)
		}
	}()

	cs := clientset(t)
	makeNS(t, cs, "wardle-sample")
	if _, err := cs.CoreV1().Services("wardle-sample").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, p := true, int32(port)
	if _, err := cs.DiscoveryV1().EndpointSlices("wardle-sample").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("https"), Port: &p}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := aggregatorclient.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	api := agg.ApiregistrationV1().APIServices()
	svcPort := int32(443)
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		name := v + ".wardle.example.com"
		if _, err := api.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: v, InsecureSkipTLSVerify: true,
				GroupPriorityMinimum: 2000, VersionPriority: map[string]int32{"v1alpha1": 10, "v1beta1": 20}[v],
				Service: &apiregistrationv1.ServiceReference{Namespace: "wardle-sample", Name: "api", Port: &svcPort}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	servertest.Eventually(t, 120*time.Second, 500*time.Millisecond, func() error {
		for _, v := range []string{"v1alpha1", "v1beta1"} {
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

	for i, v := range []string{"1.33", "1.27"} {
		k := newKubectl(t, v)
		servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
			out, err := k.run("", "api-resources", "--api-group=wardle.example.com")
			if err != nil || !strings.Contains(out, "flunders") || !strings.Contains(out, "fischers") {
				return fmt.Errorf("api-resources: %v\n%s", err, out)
			}
			return nil
		})
		flunder := fmt.Sprintf("flunder-%d", i)
		k.ok(fmt.Sprintf(`apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: %s, namespace: default}
spec: {reference: x}
`, flunder), "create", "-f", "-")
		if out := k.ok("", "get", "flunders", "-n", "default"); !strings.Contains(out, flunder) {
			t.Fatalf("kubectl %s get flunders:\n%s", v, out)
		}
		if out := k.ok("", "get", "flunder", flunder, "-n", "default", "-o", "jsonpath={.metadata.name}"); out != flunder {
			t.Fatalf("kubectl %s get flunder: %q", v, out)
		}
		k.ok("", "delete", "flunder", flunder, "-n", "default")
	}

	// sample-apiserver's own admission (BanFlunder): a Fischer disallows a name.
	k := newKubectl(t, "1.33")
	k.ok(`apiVersion: wardle.example.com/v1alpha1
kind: Fischer
metadata: {name: strict}
disallowedFlunders: [forbidden-flunder]
`, "create", "-f", "-")
	servertest.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
		out, err := k.run(`apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: forbidden-flunder, namespace: default}
`, "create", "-f", "-")
		if err == nil {
			k.run("", "delete", "flunder", "forbidden-flunder", "-n", "default")
			return fmt.Errorf("a disallowed flunder was created: %s", out)
		}
		if !strings.Contains(out, "forbidden-flunder") {
			return fmt.Errorf("refusal: %s", out)
		}
		return nil
	})
}

// freePort is a TCP port free on ip.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
