package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/proxy/agenttest"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/pki"
)

// fixture is the proxy handler behind the server's real filter chain (authentication by a
// test token, authorization by testAuthorizer), in front of an agent stub and a pod's HTTP
// server, over objects held in memory.
type fixture struct {
	url     string
	agent   *agenttest.Agent
	objects *memObjects
	// proxyable is false when the machine has no global unicast address: pods/proxy,
	// services/proxy and nodes/proxy refuse loopback addresses, as upstream.
	proxyable bool
	podPort   int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	host, proxyable := agenttest.GlobalUnicastIPv4()
	p, err := pki.Ensure(pki.Options{Dir: t.TempDir(), Hosts: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	agent := agenttest.Start(t, host, p)
	podPort := agenttest.StartPod(t, host)
	agentHost, agentPort, _ := net.SplitHostPort(agent.Addr)
	port, _ := strconv.Atoi(agentPort)

	objs := &memObjects{pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}, services: map[string]*corev1.Service{}}
	pod := func(name, node string, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
		}
		return p
	}
	web := pod("web", "n1", "app")
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: int32(podPort)}}
	web.Status.PodIP, web.Status.PodIPs = agentHost, []corev1.PodIP{{IP: agentHost}}
	objs.addPod(web)
	objs.addPod(pod("two", "n1", "a", "b"))
	objs.addPod(pod("pending", "", "app"))
	objs.addPod(pod("waiting", "n1", "waiting"))
	objs.addPod(pod("lost", "ghost", "app"))
	objs.nodes["n1"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1.invalid"}, {Type: corev1.NodeInternalIP, Address: agentHost}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
	}}
	objs.services["default/websvc"] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "websvc", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	objs.slices = []*discoveryv1.EndpointSlice{{
		ObjectMeta:  metav1.ObjectMeta{Name: "websvc-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "websvc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			// Not ready, and not a pod: never chosen.
			{Addresses: []string{"192.0.2.99"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}},
			{Addresses: []string{"192.0.2.98"}},
			{Addresses: []string{agentHost}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(podPort))}},
	}}

	kubeletTLS, err := KubeletClientTLS(p)
	if err != nil {
		t.Fatal(err)
	}
	authz := testAuthorizer{}
	h, err := New(Options{
		Objects:    objs,
		KubeletTLS: kubeletTLS,
		Authorize: func(ctx context.Context, u *request.User, info *request.Info) (bool, string) {
			return filters.Allowed(ctx, authz, u, info)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(filters.Chain(h, filters.Options{Authenticators: []filters.Authenticator{tokens{}}, Authorizer: authz}))
	front.StartTLS()
	t.Cleanup(front.Close)
	return &fixture{url: front.URL, agent: agent, objects: objs, proxyable: proxyable, podPort: podPort}
}

// config is a client configuration for user (a token of tokens).
func (f *fixture) config(user string) *restclient.Config {
	return &restclient.Config{Host: f.url, BearerToken: user, TLSClientConfig: restclient.TLSClientConfig{Insecure: true}}
}

// get sends method path as user and returns the code and body.
func (f *fixture) do(t *testing.T, user, method, path string) (int, string, http.Header) {
	t.Helper()
	c, err := restclient.HTTPClientFor(f.config(user))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(method, f.url+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// status decodes a metav1.Status body.
func status(t *testing.T, body string) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status: %q", body)
	}
	return st
}

func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		path, method string
		want         endpoint
		code         int
	}{
		{"/api/v1/namespaces/d/pods/p/log", "GET", podLog, 0},
		{"/api/v1/namespaces/d/pods/p/log", "POST", 0, 405},
		{"/api/v1/namespaces/d/pods/p/log/x", "GET", 0, 404},
		{"/api/v1/pods/p/log", "GET", 0, 404},
		{"/api/v1/namespaces/d/pods/p/exec", "POST", podExec, 0},
		{"/api/v1/namespaces/d/pods/p/exec", "GET", podExec, 0},
		{"/api/v1/namespaces/d/pods/p/exec", "PUT", 0, 405},
		{"/api/v1/namespaces/d/pods/p/attach", "GET", podAttach, 0},
		{"/api/v1/namespaces/d/pods/p/portforward", "POST", podPortForward, 0},
		{"/api/v1/namespaces/d/pods/p/portforward/x", "POST", 0, 404},
		{"/api/v1/namespaces/d/pods/p:80/proxy/a/b", "DELETE", podProxy, 0},
		{"/api/v1/namespaces/d/pods/p/proxy", "OPTIONS", podProxy, 0},
		{"/api/v1/namespaces/d/pods/p/proxy", "CONNECT", 0, 405},
		{"/api/v1/namespaces/d/services/s/proxy/", "PATCH", serviceProxy, 0},
		{"/api/v1/nodes/n/proxy/healthz", "GET", nodeProxy, 0},
		{"/api/v1/namespaces/d/nodes/n/proxy", "GET", 0, 404},
		{"/api/v1/namespaces/d/pods/p/status", "GET", 0, 404},
		{"/api/v1/namespaces/d/configmaps/c/proxy", "GET", 0, 404},
		{"/apis/apps/v1/namespaces/d/pods/p/log", "GET", 0, 404},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		ep, se := route(request.Parse(r), tc.method)
		code := 0
		if se != nil {
			code = int(se.Status().Code)
		}
		if ep != tc.want || code != tc.code {
			t.Errorf("%s %s: endpoint %d code %d, want %d %d", tc.method, tc.path, ep, code, tc.want, tc.code)
		}
	}
}

func TestProxyPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/nodes/n/proxy":               "",
		"/api/v1/nodes/n/proxy/":              "/",
		"/api/v1/nodes/n/proxy/healthz":       "/healthz",
		"/api/v1/nodes/n/proxy/a/b/":          "/a/b/",
		"/api/v1/namespaces/d/pods/p/proxy/x": "/x",
	} {
		if got := request.Parse(httptest.NewRequest("GET", path, nil)).SubresourcePath(); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

func TestLogs(t *testing.T) {
	f := newFixture(t)
	code, body, hdr := f.do(t, "admin", "GET", "/api/v1/namespaces/default/pods/web/log?tailLines=5&timestamps=true&limitBytes=100&sinceSeconds=60")
	if code != 200 || body != "log of default/web/app\n" || hdr.Get("Content-Type") != "text/plain" {
		t.Fatalf("log: %d %q %q", code, body, hdr.Get("Content-Type"))
	}
	req, client := f.agent.LastRequest()
	if want := "GET /containerLogs/default/web/app?limitBytes=100&sinceSeconds=60&tailLines=5&timestamps=true"; req != want {
		t.Errorf("agent got %q, want %q", req, want)
	}
	if client != KubeletClientUser {
		t.Errorf("agent saw client %q, want %q", client, KubeletClientUser)
	}
	// A container among several, by name.
	if code, body, _ := f.do(t, "admin", "GET", "/api/v1/namespaces/default/pods/two/log?container=b"); code != 200 || body != "log of default/two/b\n" {
		t.Errorf("container b: %d %q", code, body)
	}
}

func TestLogFollowStreams(t *testing.T) {
	f := newFixture(t)
	c, err := restclient.HTTPClientFor(f.config("admin"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(f.url + "/api/v1/namespaces/default/pods/web/log?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	// The first line arrives while the agent still holds the stream open: it was flushed.
	if line, err := r.ReadString('\n'); err != nil || line != "log of default/web/app\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(f.agent.Release)
	if line, err := r.ReadString('\n'); err != nil || line != "second line\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after the stream: %q, %v", rest, err)
	}
}

func TestLogErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"GET", "pods/nope/log", 404, `pods "nope" not found`},
		{"GET", "pods/two/log", 400, "a container name must be specified for pod two, choose one of: [a b]"},
		{"GET", "pods/two/log?container=c", 400, "container c is not valid for pod two"},
		{"GET", "pods/web/log?tailLines=-1", 422, "tailLines"},
		{"GET", "pods/web/log?limitBytes=0", 422, "limitBytes"},
		{"GET", "pods/web/log?sinceSeconds=0", 422, "sinceSeconds"},
		{"GET", "pods/web/log?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", 422, "at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{"GET", "pods/web/log?tailLines=abc", 400, "abc"},
		{"GET", "pods/web/log?sinceTime=yesterday", 400, "yesterday"},
		{"GET", "pods/waiting/log", 400, `is waiting to start: ContainerCreating`},
		{"GET", "pods/lost/log", 404, `nodes "ghost" not found`},
		{"POST", "pods/web/log", 405, ""},
		{"GET", "pods/web/log/more", 404, "the server could not find the requested resource"},
	} {
		code, body, _ := f.do(t, "admin", tc.method, "/api/v1/namespaces/default/"+tc.path)
		if code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, body, tc.code)
			continue
		}
		if st := status(t, body); int(st.Code) != tc.code || !strings.Contains(st.Message, tc.msg) {
			t.Errorf("%s %s: %+v, want message with %q", tc.method, tc.path, st, tc.msg)
		}
	}
	// A pod without a node has no logs yet: upstream answers 204.
	if code, body, _ := f.do(t, "admin", "GET", "/api/v1/namespaces/default/pods/pending/log"); code != 204 || body != "" {
		t.Errorf("pending pod: %d %q", code, body)
	}
}

// executors are the client-go executors kubectl uses: SPDY (every kubectl), WebSocket v5
// (kubectl ≥ 1.30, translated to SPDY toward the agent) and WebSocket v4 (other clients,
// passed through to the agent).
func executors(t *testing.T, cfg *restclient.Config, u *url.URL) map[string]remotecommand.Executor {
	t.Helper()
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	v5, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	v4, err := remotecommand.NewWebSocketExecutorForProtocols(cfg, "GET", u.String(), "v4.channel.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]remotecommand.Executor{"spdy": spdyExec, "websocket-v5": v5, "websocket-v4": v4}
}

func (f *fixture) execURL(sub, pod string, q url.Values) *url.URL {
	u, _ := url.Parse(f.url + "/api/v1/namespaces/default/pods/" + pod + "/" + sub)
	u.RawQuery = q.Encode()
	return u
}

func TestExec(t *testing.T) {
	f := newFixture(t)
	cfg := f.config("admin")
	cases := []struct {
		name     string
		q        url.Values
		stdin    string
		stdout   string
		stderr   string
		exitCode int
	}{
		{"echo", url.Values{"command": {"echo", "hi"}, "stdout": {"true"}, "stderr": {"true"}}, "", "hi\n", "", 0},
		{"stdin", url.Values{"command": {"line"}, "stdin": {"true"}, "stdout": {"true"}}, "hello\nworld\n", "hello\n", "", 0},
		// Stdin to its end: only SPDY and WebSocket v5 can close stdin.
		{"stdin to EOF", url.Values{"command": {"cat"}, "stdin": {"true"}, "stdout": {"true"}}, "hello\nworld\n", "hello\nworld\n", "", 0},
		{"exit code", url.Values{"command": {"fail"}, "stdout": {"true"}, "stderr": {"true"}}, "", "", "failing\n", 3},
		{"tty", url.Values{"command": {"tty"}, "stdout": {"true"}, "tty": {"true"}}, "", "default/web app tty=true\n", "", 0},
	}
	for kind := range executors(t, cfg, f.execURL("exec", "web", nil)) {
		for _, tc := range cases {
			if kind == "websocket-v4" && tc.name == "stdin to EOF" {
				continue
			}
			// "line" exits with the second line of stdin unread. Where stdin can close, the
			// client's close frame then reaches a closed socket, the backend answers with a
			// TCP reset, and a reset discards what the proxy had received but not yet read —
			// the output and the status (CI lost both once). Those protocols are covered by
			// "stdin to EOF"; "line" is there for v4, which cannot close stdin.
			if kind != "websocket-v4" && tc.name == "stdin" {
				continue
			}
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				ex := executors(t, cfg, f.execURL("exec", "web", tc.q))[kind]
				var stdout, stderr bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &stdout, Tty: tc.q.Get("tty") == "true"}
				if tc.q.Get("stderr") == "true" {
					opts.Stderr = &stderr
				}
				if tc.q.Get("stdin") == "true" {
					opts.Stdin = strings.NewReader(tc.stdin)
				}
				err := ex.StreamWithContext(ctx, opts)
				if tc.exitCode == 0 && err != nil {
					t.Fatal(err)
				}
				if tc.exitCode != 0 {
					ee, ok := err.(exec.CodeExitError)
					if !ok || ee.Code != tc.exitCode {
						t.Fatalf("error %v (%T), want exit code %d", err, err, tc.exitCode)
					}
				}
				if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
					t.Fatalf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
				}
			})
		}
	}
}

func TestAttach(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := url.Values{"stdin": {"true"}, "stdout": {"true"}, "container": {"b"}}
	for kind, ex := range executors(t, f.config("admin"), f.execURL("attach", "two", q)) {
		var stdout bytes.Buffer
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &stdout}); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if want := "attached to default/two b\ntyped\n"; stdout.String() != want {
			t.Errorf("%s: stdout %q, want %q", kind, stdout.String(), want)
		}
	}
}

// TestExecBase64WebSocket speaks the base64 channel protocol (browsers' clients) by hand:
// each text message is the channel digit and the base64 of its data.
func TestExecBase64WebSocket(t *testing.T) {
	f := newFixture(t)
	u := f.execURL("exec", "web", url.Values{"command": {"echo", "b64"}, "stdout": {"1"}})
	u.Scheme = "wss"
	d := websocket.Dialer{TLSClientConfig: insecureTLS(), Subprotocols: []string{"v4.base64.channel.k8s.io"}, HandshakeTimeout: 30 * time.Second}
	conn, resp, err := d.Dial(u.String(), http.Header{"Authorization": {"Bearer admin"}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer conn.Close()
	if conn.Subprotocol() != "v4.base64.channel.k8s.io" {
		t.Fatalf("subprotocol %q", conn.Subprotocol())
	}
	var stdout, errCh strings.Builder
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		typ, msg, err := conn.ReadMessage()
		if err != nil {
			break // the agent closes when the command ends
		}
		if typ != websocket.TextMessage || len(msg) < 1 {
			t.Fatalf("message type %d %q", typ, msg)
		}
		data, err := base64.StdEncoding.DecodeString(string(msg[1:]))
		if err != nil {
			t.Fatalf("not base64: %q", msg)
		}
		switch msg[0] {
		case '1':
			stdout.Write(data)
		case '3':
			errCh.Write(data)
		}
	}
	if stdout.String() != "b64\n" || !strings.Contains(errCh.String(), `"status":"Success"`) {
		t.Fatalf("stdout %q, error channel %q", stdout.String(), errCh.String())
	}
}

func TestPortForward(t *testing.T) {
	f := newFixture(t)
	cfg := f.config("admin")
	u := f.execURL("portforward", "web", nil)
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for kind, dialer := range map[string]httpstream.Dialer{
		"spdy":      spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u),
		"websocket": ws,
	} {
		t.Run(kind, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			var errOut bytes.Buffer
			pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:80"}, stop, ready, io.Discard, &errOut)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- pf.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("port-forward ended before it was ready: %v %s", err, errOut.String())
			}
			ports, err := pf.GetPorts()
			if err != nil || len(ports) != 1 || ports[0].Remote != 80 {
				t.Fatalf("ports %v, %v", ports, err)
			}
			conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(time.Minute))
			r := bufio.NewReader(conn)
			if line, err := r.ReadString('\n'); err != nil || line != "default/web port 80\n" {
				t.Fatalf("greeting %q, %v", line, err)
			}
			io.WriteString(conn, "ping\n")
			if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
				t.Fatalf("echo %q, %v", line, err)
			}
			conn.Close()
			close(stop)
			if err := <-done; err != nil {
				t.Fatalf("port-forward: %v", err)
			}
		})
	}
}

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} }

// tokens authenticates "Bearer <user>": admin is in system:masters.
type tokens struct{}

func (tokens) Authenticate(r *http.Request) (*request.User, bool, error) {
	name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false, nil
	}
	u := &request.User{Name: name, Groups: []string{"system:authenticated"}}
	if name == "admin" {
		u.Groups = append(u.Groups, filters.MastersGroup)
	}
	return u, true, nil
}

// testAuthorizer lets viewer get anything and execer get anything and create pods/exec.
type testAuthorizer struct{}

func (testAuthorizer) Authorize(_ context.Context, u *request.User, info *request.Info) (bool, string) {
	switch {
	case info.Verb == "get":
		return u.Name == "viewer" || u.Name == "execer", ""
	case info.Verb == "create" && info.Resource == "pods" && info.Subresource == "exec":
		return u.Name == "execer", ""
	}
	return false, ""
}

// memObjects holds the test's objects.
type memObjects struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	nodes    map[string]*corev1.Node
	services map[string]*corev1.Service
	slices   []*discoveryv1.EndpointSlice
}

func (m *memObjects) addPod(p *corev1.Pod) { m.pods[p.Namespace+"/"+p.Name] = p }

func (m *memObjects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pods[ns+"/"+name]; ok {
		return p.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (m *memObjects) Node(_ context.Context, name string) (*corev1.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.nodes[name]; ok {
		return n.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

func (m *memObjects) Service(_ context.Context, ns, name string) (*corev1.Service, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.services[ns+"/"+name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
}

func (m *memObjects) EndpointSlices(_ context.Context, ns, svc string) ([]*discoveryv1.EndpointSlice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*discoveryv1.EndpointSlice
	for _, s := range m.slices {
		if s.Namespace == ns && s.Labels[discoveryv1.LabelServiceName] == svc {
			out = append(out, s.DeepCopy())
		}
	}
	return out, nil
}

// TestStreamAuthorization: exec needs create on pods/exec however it arrives. SPDY (POST)
// is refused by the filter; a WebSocket (GET, authorized as get) by the handler's own
// check, as upstream's AuthorizePodWebsocketUpgradeCreatePermission.
func TestStreamAuthorization(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := url.Values{"command": {"echo", "hi"}, "stdout": {"true"}}
	for _, user := range []string{"viewer", "execer"} {
		for kind, ex := range executors(t, f.config(user), f.execURL("exec", "web", q)) {
			var stdout bytes.Buffer
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout})
			if user == "execer" {
				if err != nil || stdout.String() != "hi\n" {
					t.Errorf("%s %s: %q, %v", user, kind, stdout.String(), err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "forbidden") {
				t.Errorf("%s %s: %v, want 403", user, kind, err)
			}
		}
	}
	// The handler's own check, on the wire: a WebSocket GET from viewer.
	u := f.execURL("exec", "web", q)
	u.Scheme = "wss"
	d := websocket.Dialer{TLSClientConfig: insecureTLS(), Subprotocols: []string{"v5.channel.k8s.io"}}
	_, resp, err := d.Dial(u.String(), http.Header{"Authorization": {"Bearer viewer"}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("viewer WebSocket exec: %v %v, want 403", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if st := status(t, string(body)); st.Reason != metav1.StatusReasonForbidden ||
		st.Message != `pods "web" is forbidden: User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"` {
		t.Fatalf("403 body: %+v", st)
	}
}

func TestStreamErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"POST", "pods/pending/exec?command=ls&stdout=1", 400, "pod pending does not have a host assigned"},
		{"POST", "pods/pending/portforward?ports=80", 400, "pod pending does not have a host assigned"},
		{"POST", "pods/two/exec?command=ls&stdout=1", 400, "a container name must be specified for pod two, choose one of: [a b]"},
		{"POST", "pods/two/attach?container=zz&stdout=1", 400, "container zz is not valid for pod two"},
		{"POST", "pods/nope/exec?command=ls", 404, `pods "nope" not found`},
		{"POST", "pods/lost/exec?command=ls&stdout=1", 404, `nodes "ghost" not found`},
		{"POST", "pods/web/portforward?ports=http", 400, "http"},
		{"POST", "pods/web/exec?command=ls&stdout=1&dryRun=All", 400, "dryRun is not supported"},
		// Not an upgrade: upstream's proxy asks for one.
		{"POST", "pods/web/exec?command=ls&stdout=1", 400, "Upgrade request required"},
		{"PUT", "pods/web/exec?command=ls", 405, ""},
	} {
		code, body, _ := f.do(t, "admin", tc.method, "/api/v1/namespaces/default/"+tc.path)
		if code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, body, tc.code)
			continue
		}
		if st := status(t, body); !strings.Contains(st.Message, tc.msg) {
			t.Errorf("%s %s: %q, want %q in it", tc.method, tc.path, st.Message, tc.msg)
		}
	}
}

func TestNodeProxy(t *testing.T) {
	f := newFixture(t)
	if !f.proxyable {
		t.Skip("no global unicast address on this machine: nodes/proxy refuses loopback agents, as upstream")
	}
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/api/v1/nodes/n1/proxy/healthz", 200, "ok"},
		{"GET", "/api/v1/nodes/n1/proxy/stats/summary?only=cpu", 200, "agent GET /stats/summary?only=cpu"},
		{"POST", "/api/v1/nodes/n1/proxy/run/", 200, "agent POST /run/"},
		{"GET", "/api/v1/nodes/ghost/proxy/healthz", 404, ""},
		{"GET", "/api/v1/nodes/a:b:c:d/proxy/healthz", 400, ""},
	} {
		code, body, _ := f.do(t, "admin", tc.method, tc.path)
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.body)
		}
	}
	if _, client := f.agent.LastRequest(); client != KubeletClientUser {
		t.Errorf("agent saw %q", client)
	}
	// No path: upstream redirects to the path with a slash.
	code, _, hdr := f.do(t, "admin", "GET", "/api/v1/nodes/n1/proxy")
	if code != 301 || hdr.Get("Location") != "/api/v1/nodes/n1/proxy/" {
		t.Errorf("no path: %d %q", code, hdr.Get("Location"))
	}
}

func TestPodAndServiceProxy(t *testing.T) {
	f := newFixture(t)
	if !f.proxyable {
		t.Skip("no global unicast address on this machine: pods/proxy refuses loopback pod IPs, as upstream")
	}
	port := strconv.Itoa(f.podPort)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "pods/web/proxy/hello?x=1", 200, "pod GET /hello?x=1"},
		{"PUT", "pods/web:" + port + "/proxy/a/b/", 200, "pod PUT /a/b/"},
		{"GET", "pods/http:web:" + port + "/proxy/", 200, "pod GET /"},
		{"GET", "pods/nope/proxy/", 404, ""},
		{"GET", "pods/pending/proxy/", 400, ""},      // no pod IP: "address not allowed"
		{"GET", "pods/web:99999/proxy/", 503, ""},    // nothing to reach
		{"GET", "pods/a:b:c:d/proxy/", 400, ""},      // not [scheme:]name[:port]
		{"GET", "services/websvc/proxy/hi", 503, ""}, // no port named "" in the slice
		{"GET", "services/websvc:http/proxy/hi", 200, "pod GET /hi"},
		{"GET", "services/websvc:80/proxy/hi", 200, "pod GET /hi"},
		{"GET", "services/websvc:81/proxy/hi", 503, ""},
		{"GET", "services/nosvc:http/proxy/", 503, ""},
		{"GET", "services/nosvc:80/proxy/", 404, ""},
	} {
		code, body, _ := f.do(t, "admin", tc.method, "/api/v1/namespaces/default/"+tc.path)
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.body)
		}
		if tc.code != 200 {
			status(t, body)
		}
	}
}

// TestBadInput: odd names, queries and methods answer 4xx Status, never 5xx.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	paths := []string{
		"pods/web/log?container=", "pods/web/log?previous=2", "pods/web/log?limitBytes=-5", "pods/web/log?tailLines=99999999999999999999",
		"pods/%00/log", "pods/web:80/log", "pods/web/exec", "pods/web/exec?command=", "pods/web/attach?tty=yes",
		"pods/web/portforward?ports=0", "pods/web/portforward?ports=-1", "pods/web/portforward?ports=70000",
		"pods/:/proxy/", "pods/::/proxy/", "services/:/proxy/", "services/a:b:c:d/proxy/",
	}
	for _, p := range paths {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			code, body, _ := f.do(t, "admin", m, "/api/v1/namespaces/default/"+p)
			if code >= 500 || code < 200 {
				t.Errorf("%s %s: %d %s", m, p, code, body)
			}
		}
	}
}
