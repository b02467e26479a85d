package ctl

import (
	"bufio"
	"bytes"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/apiserver/proxy"
	"kubeos.dev/kube/internal/apiserver/proxy/agenttest"
	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server/servertest"
)

var kubectlVersions = []string{"1.27", "1.33"}

func TestKubectlLogs(t *testing.T) {
	streamingSuite.Need(t)
	for _, v := range kubectlVersions {
		t.Run(v, func(t *testing.T) {
			w := newWorld(t, "logs-"+strings.ReplaceAll(v, ".", ""))
			k := newStreamingKubectl(t, v, streamingSrv.Kubeconfig)
			if out := k.ok("", "-n", w.ns, "logs", "web", "--tail=3"); out != "log of "+w.ns+"/web/app\n" {
				t.Fatalf("logs: %q", out)
			}
			req, client := w.agent.LastRequest()
			if req != "GET /containerLogs/"+w.ns+"/web/app?tailLines=3" || client != proxy.KubeletClientUser {
				t.Errorf("agent saw %q from %q", req, client)
			}

			// -f: the first line shows while the agent holds the stream; the second once
			// the agent writes it, and kubectl ends with the stream.
			out, _, cmd := k.start("-n", w.ns, "logs", "-f", "web")
			if line, err := out.ReadString('\n'); err != nil || line != "log of "+w.ns+"/web/app\n" {
				t.Fatalf("logs -f first line %q, %v", line, err)
			}
			close(w.agent.Release)
			if line, err := out.ReadString('\n'); err != nil || line != "second line\n" {
				t.Fatalf("logs -f second line %q, %v", line, err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("logs -f: %v", err)
			}
		})
	}
}

func TestKubectlExec(t *testing.T) {
	streamingSuite.Need(t)
	for _, v := range kubectlVersions {
		t.Run(v, func(t *testing.T) {
			w := newWorld(t, "exec-"+strings.ReplaceAll(v, ".", ""))
			k := newStreamingKubectl(t, v, streamingSrv.Kubeconfig)
			if out := k.ok("", "-n", w.ns, "exec", "web", "--", "echo", "hi"); out != "hi\n" {
				t.Fatalf("exec echo: %q", out)
			}
			if out := k.ok("hello\nworld\n", "-n", w.ns, "exec", "-i", "web", "--", "cat"); out != "hello\nworld\n" {
				t.Fatalf("exec -i cat: %q", out)
			}
			if v != "1.27" {
				_, errOut, err := k.run("", "-n", w.ns, "exec", "web", "-v=4", "--", "echo", "hi")
				if err != nil {
					t.Fatal(err)
				}
				wantWebSocket(t, errOut, "The subprotocol is v5.channel.k8s.io", "fallback")
			}
			_, errOut, err := k.run("", "-n", w.ns, "exec", "web", "--", "fail")
			if err == nil || !strings.Contains(errOut, "failing") || !strings.Contains(errOut, "command terminated with exit code 3") {
				t.Fatalf("exec fail: %v %q", err, errOut)
			}
			_, errOut, err = k.run("", "-n", w.ns, "exec", "web", "-c", "nope", "--", "echo")
			if err == nil || !strings.Contains(errOut, "container nope is not valid for pod web") {
				t.Fatalf("exec -c nope: %v %q", err, errOut)
			}
		})
	}
}

// TestClientGoExec drives the server with client-go's executors directly: SPDY, and
// WebSocket v5 (translated to SPDY toward the agent).
func TestClientGoExec(t *testing.T) {
	streamingSuite.Need(t)
	w := newWorld(t, "clientgo")
	cfg := adminConfig(t)
	u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/" + w.ns + "/pods/web/exec?command=cat&stdin=true&stdout=true")
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"spdy": spdyExec, "websocket": wsExec} {
		var stdout bytes.Buffer
		if err := ex.StreamWithContext(ctxT(t), remotecommand.StreamOptions{Stdin: strings.NewReader("typed"), Stdout: &stdout}); err != nil || stdout.String() != "typed" {
			t.Errorf("%s: %q, %v", name, stdout.String(), err)
		}
	}
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 80`)

func TestKubectlPortForward(t *testing.T) {
	streamingSuite.Need(t)
	for _, v := range kubectlVersions {
		t.Run(v, func(t *testing.T) {
			w := newWorld(t, "pf-"+strings.ReplaceAll(v, ".", ""))
			k := newStreamingKubectl(t, v, streamingSrv.Kubeconfig)
			out, stderr, _ := k.start("-n", w.ns, "port-forward", "pod/web", ":80", "-v=4")
			line, err := out.ReadString('\n')
			m := forwarding.FindStringSubmatch(line)
			if err != nil || m == nil {
				t.Fatalf("port-forward printed %q, %v", line, err)
			}
			conn, err := net.Dial("tcp", "127.0.0.1:"+m[1])
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(time.Minute))
			r := bufio.NewReader(conn)
			if got, err := r.ReadString('\n'); err != nil || got != w.ns+"/web port 80\n" {
				t.Fatalf("greeting %q, %v", got, err)
			}
			conn.Write([]byte("ping\n"))
			if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
				t.Fatalf("echo %q, %v", got, err)
			}
			if v != "1.27" {
				// WebSocket, not the SPDY fallback.
				wantWebSocket(t, stderr.String(), "negotiated protocol: portforward.k8s.io", "fallback")
			}
		})
	}
}

func TestKubectlNodeProxy(t *testing.T) {
	streamingSuite.Need(t)
	w := newWorld(t, "nodeproxy")
	if !w.proxyable {
		t.Skip("no global unicast address on this machine: nodes/proxy refuses a loopback agent, as upstream")
	}
	for _, v := range kubectlVersions {
		k := newStreamingKubectl(t, v, streamingSrv.Kubeconfig)
		if out := k.ok("", "get", "--raw", "/api/v1/nodes/"+w.node+"/proxy/healthz"); out != "ok" {
			t.Errorf("kubectl.%s get --raw healthz: %q", v, out)
		}
		if out := k.ok("", "get", "--raw", "/api/v1/nodes/"+w.node+"/proxy/configz"); out != "agent GET /configz" {
			t.Errorf("kubectl.%s get --raw configz: %q", v, out)
		}
	}
	if _, client := w.agent.LastRequest(); client != proxy.KubeletClientUser {
		t.Errorf("agent saw client %q", client)
	}
}

// TestKubectlPodAndServiceProxy: pods/proxy to the pod's IP and services/proxy to the
// service's endpoint slice, read from storage, through kubectl get --raw.
func TestKubectlPodAndServiceProxy(t *testing.T) {
	streamingSuite.Need(t)
	w := newWorld(t, "podproxy")
	if !w.proxyable {
		t.Skip("no global unicast address on this machine: pods/proxy refuses a loopback pod IP, as upstream")
	}
	ctx := ctxT(t)
	cs := clientset(t, adminConfig(t))
	host, _, _ := net.SplitHostPort(w.agent.Addr)
	port := agenttest.StartPod(t, host)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "websvc"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(int32(port))}},
	}}
	if _, err := cs.CoreV1().Services(w.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "websvc-1", Labels: map[string]string{discoveryv1.LabelServiceName: "websvc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: w.ns, Name: "web"}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(port))}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(w.ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	base := "/api/v1/namespaces/" + w.ns
	for _, v := range kubectlVersions {
		k := newStreamingKubectl(t, v, streamingSrv.Kubeconfig)
		for path, want := range map[string]string{
			base + "/pods/web:" + strconv.Itoa(port) + "/proxy/hello?x=1": "pod GET /hello?x=1",
			base + "/services/websvc:http/proxy/hi":                       "pod GET /hi",
			base + "/services/websvc:80/proxy/hi":                         "pod GET /hi",
		} {
			if out := k.ok("", "get", "--raw", path); out != want {
				t.Errorf("kubectl.%s get --raw %s: %q, want %q", v, path, out, want)
			}
		}
		_, errOut, err := k.run("", "get", "--raw", base+"/services/nosvc:http/proxy/")
		if err == nil || !strings.Contains(errOut, `no endpoints available for service "nosvc"`) {
			t.Errorf("kubectl.%s services/nosvc/proxy: %v %q", v, err, errOut)
		}
	}
}

// TestExecNeedsCreate: a user who may get pods/exec but not create it is refused, over
// WebSocket (kubectl 1.33, which then falls back to SPDY) and SPDY (kubectl 1.27) alike;
// pods/log needs only get.
func TestExecNeedsCreate(t *testing.T) {
	streamingSuite.Need(t)
	w := newWorld(t, "exec-rbac")
	ctx := ctxT(t)
	cs := clientset(t, adminConfig(t))
	const user = "exec-getter"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "exec-getter", Namespace: w.ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "pods/exec"}, Verbs: []string{"get", "list"},
	}}}
	if _, err := cs.RbacV1().Roles(w.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "exec-getter", Namespace: w.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "exec-getter"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := cs.RbacV1().RoleBindings(w.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := streamingSrv.Inner().LoopbackConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := pki.WriteKubeconfig(kc, cfg.Host, cfg.CAData, cfg.CertData, cfg.KeyData, user); err != nil {
		t.Fatal(err)
	}
	for _, v := range kubectlVersions {
		k := newStreamingKubectl(t, v, kc)
		// The binding takes effect once the authorizer's cache has it.
		servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
			_, _, err := k.run("", "-n", w.ns, "logs", "web")
			return err
		})
		_, errOut, err := k.run("", "-n", w.ns, "exec", "web", "--", "echo", "hi")
		if err == nil || !strings.Contains(errOut, `cannot create resource "pods/exec" in API group "" in the namespace "`+w.ns+`"`) {
			t.Errorf("kubectl.%s exec as %s: %v %q, want 403", v, user, err, errOut)
		}
	}
	// client-go's WebSocket executor does not fall back: the GET, allowed as `get` by the
	// filter, is refused by the handler's own `create` check.
	u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/" + w.ns + "/pods/web/exec?command=echo&stdout=true")
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := wsExec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), `cannot create resource "pods/exec"`) {
		t.Errorf("WebSocket exec as %s: %v, want forbidden", user, err)
	}
}

// wantWebSocket checks kubectl 1.33's -v=4 log: the WebSocket was negotiated and there was no
// fallback to SPDY.
func wantWebSocket(t *testing.T, log, negotiated, fallback string) {
	t.Helper()
	if !strings.Contains(log, negotiated) || strings.Contains(log, fallback) {
		t.Errorf("kubectl did not stay on WebSocket (want %q, no %q):\n%s", negotiated, fallback, log)
	}
}
