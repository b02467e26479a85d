//go:build metricsserver

// TestKubectlTop builds metrics-server from the module proxy (8 CPU-minutes from a cold
// cache, over 30 minutes of wall time on a loaded 2-core machine), too much for the
// default suite's 25-minute budget; it runs with the metricsserver tag:
//
//	go test -tags metricsserver -run TestKubectlTop ./test/agent/

package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kubeos.dev/kube/internal/server/servertest"
)

// metricsServerVersion is the newest sigs.k8s.io/metrics-server on the module proxy that
// builds with Kube's k8s.io modules and Go: v0.9.1 declares go 1.26.10.
const metricsServerVersion = "v0.9.0"

// buildMetricsServer builds metrics-server from the module proxy in a scratch module whose
// k8s.io modules are Kube's versions (as ../shared/peers/build-k8s.sh builds upstream
// components), into a directory kept between runs (keyed by both versions); a failed build
// fails the test.
func buildMetricsServer(t *testing.T, ctx context.Context) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/apiserver").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/apiserver: %v", err)
	}
	k8s := strings.TrimSpace(string(out))
	cache := filepath.Join(os.TempDir(), "kube-test-metrics-server-"+metricsServerVersion+"-k8s-"+k8s)
	bin := filepath.Join(cache, "metrics-server")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	work := t.TempDir()
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	run := func(args ...string) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("mod", "init", "kubeos.dev/metrics-server-build")
	get := []string{"get", "sigs.k8s.io/metrics-server/cmd/metrics-server@" + metricsServerVersion}
	for _, m := range []string{"api", "apimachinery", "apiserver", "client-go", "component-base", "metrics"} {
		get = append(get, "k8s.io/"+m+"@"+k8s)
	}
	run(get...)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	// Built beside its final name and renamed: another test process may be building too.
	tmp := filepath.Join(cache, fmt.Sprintf("metrics-server.%d", os.Getpid()))
	run("build", "-o", tmp, "sigs.k8s.io/metrics-server/cmd/metrics-server")
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// extensionIP is a non-loopback IPv4 address of this machine (EndpointSlices refuse
// loopback addresses, as upstream's validation does).
func extensionIP(t *testing.T) string {
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
	t.Fatal("no non-loopback IPv4 address on this machine for metrics-server")
	return ""
}

// TestKubectlTop: upstream's metrics-server, run as a process with its own ServiceAccount
// (upstream's RBAC: system:metrics-server, system:auth-delegator and the
// extension-apiserver-authentication reader) and registered through the APIService
// v1beta1.metrics.k8s.io (a Service and EndpointSlice naming it), scrapes the agent's
// /metrics/resource with that ServiceAccount's token (TokenReview and SubjectAccessReview
// by the agent) and verifies the agent's serving certificate; `kubectl top node` and
// `kubectl top pod` (1.27 and 1.33) then print the node's and a pod's figures.
func TestKubectlTop(t *testing.T) {
	ctx := ctxT(t, 25*time.Minute)
	bin := buildMetricsServer(t, ctx)
	cs := clientset(t)
	ns := namespace(t, cs)

	pod := busyboxPod("busy", nodeName, "while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The ServiceAccount and upstream's RBAC for it (metrics-server's components.yaml).
	token := serviceAccountToken(t, cs, ns, "metrics-server")
	grantNodes(t, cs, ns, "metrics-server", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}}})
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "metrics-server"}}
	delegator := ns + "-metrics-server-auth-delegator"
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: delegator},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}, Subjects: sa}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), delegator, metav1.DeleteOptions{})
	})
	reader := ns + "-metrics-server-auth-reader"
	if _, err := cs.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}, Subjects: sa}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().RoleBindings("kube-system").Delete(context.Background(), reader, metav1.DeleteOptions{})
	})

	// Its kubeconfig: the server, its CA, the token.
	dir := t.TempDir()
	admin := adminConfig(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kc.AuthInfos["metrics-server"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "metrics-server"}
	kc.CurrentContext = "kube"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	ip := extensionIP(t)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logFile, err := os.Create(filepath.Join(dir, "metrics-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	runCtx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(runCtx, bin,
		"--bind-address", ip, "--secure-port", fmt.Sprint(port), "--cert-dir", filepath.Join(dir, "certs"),
		"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		// The agent's serving certificate is self-signed: its file holds the CA that signed it.
		"--kubelet-certificate-authority", filepath.Join(agentDir, "pki", "agent.crt"),
		"--kubelet-preferred-address-types", "InternalIP,Hostname", "--kubelet-use-node-status-port",
		// 15 s as upstream's components.yaml (it must exceed the 10 s kubelet request timeout).
		"--metric-resolution", "15s")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// running fails the test at once when metrics-server has stopped.
	running := func() {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("metrics-server exited: %v", err)
		default:
		}
	}
	defer func() {
		stop()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("metrics-server log:\n%s", b)
		}
	}()

	// The APIService and the Service and EndpointSlice it names.
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, p, portName := true, int32(port), "https"
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "metrics-server-1", Labels: map[string]string{discoveryv1.LabelServiceName: "metrics-server"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &p}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := aggregatorclient.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	svcPort := int32(443)
	apis := agg.ApiregistrationV1().APIServices()
	if _, err := apis.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", InsecureSkipTLSVerify: true,
			GroupPriorityMinimum: 100, VersionPriority: 100,
			Service: &apiregistrationv1.ServiceReference{Namespace: ns, Name: "metrics-server", Port: &svcPort}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apis.Delete(context.Background(), "v1beta1.metrics.k8s.io", metav1.DeleteOptions{}) })
	servertest.Eventually(t, 3*time.Minute, time.Second, func() error {
		running()
		a, err := apis.Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range a.Status.Conditions {
			if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("APIService v1beta1.metrics.k8s.io not Available: %+v", a.Status.Conditions)
	})
	waitPod(t, cs, ns, "busy", 90*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	// kubectl top: the node's and the pod's CPU (millicores) and memory (Mi).
	nodeRow := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(nodeName) + `\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*$`)
	podRow := regexp.MustCompile(`(?m)^busy\s+\d+m\s+\d+Mi\s*$`)
	for _, v := range []string{"1.33", "1.27"} {
		k := newKubectl(t, v)
		servertest.Eventually(t, 3*time.Minute, 2*time.Second, func() error {
			running()
			out, errOut, err := k.run("top", "node")
			if err != nil || !nodeRow.MatchString(out) {
				return fmt.Errorf("kubectl %s top node: %v %s\n%s", v, err, errOut, out)
			}
			t.Logf("kubectl %s top node:\n%s", v, out)
			return nil
		})
		servertest.Eventually(t, 3*time.Minute, 2*time.Second, func() error {
			running()
			out, errOut, err := k.run("top", "pod", "-n", ns)
			if err != nil || !podRow.MatchString(out) {
				return fmt.Errorf("kubectl %s top pod: %v %s\n%s", v, err, errOut, out)
			}
			t.Logf("kubectl %s top pod:\n%s", v, out)
			return nil
		})
	}
}
