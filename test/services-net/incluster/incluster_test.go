// Package incluster tests that pods reach the API server through the kubernetes Service
// when `kube server --agent` runs on its default bind address, 127.0.0.1 — the README's
// single-machine setup (issues 16/21). The Service lists the host's public address, as
// upstream (an Endpoints address may not be loopback), where nothing listens; the node's
// Service proxy sends the Service's traffic to the loopback listener instead
// (agent.ServicesOptions.LoopbackAPIServer). One server with its in-process agent
// (test/netharness, real containerd, no second node, no --bind-address): a busybox pod
// connects through $KUBERNETES_SERVICE_HOST, a pod running a static Go program
// built here uses client-go's rest.InClusterConfig to list pods and get its
// ServiceAccount, and the node itself connects to the ClusterIP.
package incluster

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/agent/images"
	agentruntime "kubeos.dev/kube/internal/agent/runtime"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/test/netharness"
)

var c *netharness.Cluster

// clientImage is the image of the client program (testdata/client), imported into the
// node's containerd by the test.
const clientImage = "kube.local/incluster-client:1"

func TestMain(m *testing.M) {
	os.Exit(netharness.Run(m, netharness.Options{Name: "incluster"}, &c))
}

// TestInClusterConfig: on the default bind address, a pod reaches the API server at
// $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, client-go's in-cluster configuration
// works from a pod, and the node's own processes reach the ClusterIP too.
func TestInClusterConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cs := c.Clientset(t)

	// The premise: the server listens on loopback only, and the kubernetes Service lists
	// another address (the host's), as upstream.
	u, err := url.Parse(c.Server.URL)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("server URL %s: want the default loopback bind", c.Server.URL)
	}
	var clusterIP string
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		clusterIP = svc.Spec.ClusterIP
		eps, err := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range eps.Subsets {
			for _, a := range s.Addresses {
				if ip := net.ParseIP(a.IP); ip == nil || ip.IsLoopback() {
					return fmt.Errorf("the kubernetes Service lists %q, not the host's address", a.IP)
				}
				return nil
			}
		}
		return fmt.Errorf("the kubernetes Service lists no address yet: %+v", eps.Subsets)
	})

	// Built first: the build takes longer than the pods.
	image := buildClientImage(t)
	ns := netharness.Namespace(t, cs, nil)

	// A busybox pod connects through the Service's environment variables. Its wget speaks
	// no TLS that Go's server accepts (no signature_algorithms), so it sends plain HTTP:
	// the API server's TLS listener answers that with its 400.
	wget := netharness.BusyboxPod("wget", c.A.Name,
		`timeout 30 wget -q -O- http://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/version; exit 0`)
	wget.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, wget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if log := waitSucceeded(t, cs, ns, "wget"); !strings.Contains(log, "400 Bad Request") {
		t.Errorf("wget through the kubernetes Service did not reach the API server's listener:\n%s", log)
	}

	// The Go program with client-go's in-cluster configuration, allowed to list pods and
	// read ServiceAccounts in its namespace.
	grantReads(t, cs, ns)
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err := images.Import(ctx, agentruntime.Layout{Dir: filepath.Join(c.Dir, "agent-a", "containerd")}.Socket(), image); err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: corev1.PodSpec{
		NodeName: c.A.Name, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "main", Image: clientImage, ImagePullPolicy: corev1.PullNever}},
	}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := waitSucceeded(t, cs, ns, "client")
	t.Logf("the in-cluster client's output:\n%s", log)
	sa, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"host https://" + net.JoinHostPort(clusterIP, "443") + "\n",
		"client", // its own pod, listed
		fmt.Sprintf("serviceaccount default uid %s\n", sa.UID),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the in-cluster client's output lacks %q:\n%s", want, log)
		}
	}

	// The node's own processes reach the ClusterIP as well.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(clusterIP, "443"), 10*time.Second)
	if err != nil {
		t.Errorf("from the node: %v", err)
	} else {
		conn.Close()
	}
}

// buildClientImage builds testdata/client statically and writes an OCI archive of it
// (clientImage); it returns the archive's path.
func buildClientImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "client")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/client")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/client: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "client.tar")
	files := []images.File{{Path: "client", Mode: 0o755, Data: data}, {Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777}}
	if err := images.WriteOCIFile(path, clientImage, "amd64", images.Config{Entrypoint: []string{"/client"}}, files); err != nil {
		t.Fatal(err)
	}
	return path
}

// grantReads lets the namespace's default ServiceAccount list pods and get
// ServiceAccounts there.
func grantReads(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reads"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get"}},
	}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reads"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitSucceeded waits for the pod to end and returns its log; a pod that failed fails the
// test with its log.
func waitSucceeded(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	p := netharness.WaitPod(t, cs, ns, name, 3*time.Minute, "ended", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod %s %s (%+v); its log:\n%s", name, p.Status.Phase, p.Status.ContainerStatuses, b)
	}
	return string(b)
}
