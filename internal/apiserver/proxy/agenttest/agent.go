// Package agenttest is a node agent's streaming endpoint for tests, as small as a test can
// make it: an HTTPS server that requires a client certificate signed by the cluster CA and
// serves the kubelet's paths (/containerLogs, /exec, /attach, /portForward, anything else
// for nodes/proxy) with the kubelet's own server-side libraries (k8s.io/cri-streaming), and
// a pod's plain HTTP server. Tests only: nothing in the product imports it.
//
// The agent's pretend containers run echo ARGS, cat (stdin to stdout), line (one line of
// stdin), fail (exit 3 with "failing" on stderr) and tty; attach greets "attached to
// NS/POD CONTAINER" and echoes one line of stdin; a forwarded port answers "NS/POD port N"
// and echoes; logs answer "log of NS/POD/CONTAINER", a second line once Release is closed
// when following, and the kubelet's 400 for a container named "waiting".
package agenttest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"kubeos.dev/kube/internal/pki"
)

// Agent is a running agent stub.
type Agent struct {
	// Addr is host:port.
	Addr string
	// Release, when closed, lets followed logs write their second line.
	Release chan struct{}

	mu       sync.Mutex
	requests []string // "METHOD path?query" of every request
	clients  []string // the client certificate CN of every request
}

// Start serves an agent on host (an IP) with p's serving certificate (which must name
// host), requiring client certificates signed by p's CA. It stops when the test ends.
func Start(t testing.TB, host string, p *pki.PKI) *Agent {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.ServingCertFile, p.ServingKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Addr: ln.Addr().String(), Release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", a.logs)
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", a.exec)
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", a.attach)
	mux.HandleFunc("/portForward/{ns}/{pod}", a.portForward)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "agent %s %s", r.Method, r.URL.RequestURI())
	})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.mu.Lock()
			a.requests = append(a.requests, r.Method+" "+r.URL.RequestURI())
			a.clients = append(a.clients, r.TLS.PeerCertificates[0].Subject.CommonName)
			a.mu.Unlock()
			mux.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    p.ClientCAPool(),
			MinVersion:   tls.VersionTLS12,
		},
		ErrorLog: nil,
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return a
}

// LastRequest is the last request the agent saw ("METHOD /path?query") and the common name
// of the client certificate it came with.
func (a *Agent) LastRequest() (req, client string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.requests) == 0 {
		return "", ""
	}
	return a.requests[len(a.requests)-1], a.clients[len(a.clients)-1]
}

// logs answers like the kubelet: a waiting container is a 400 with the kubelet's message;
// otherwise one line naming what was asked, and with follow a second line once released.
func (a *Agent) logs(w http.ResponseWriter, r *http.Request) {
	container := r.PathValue("container")
	if container == "waiting" {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", container, r.PathValue("pod")), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "log of %s/%s/%s\n", r.PathValue("ns"), r.PathValue("pod"), container)
	if r.URL.Query().Get("follow") != "true" {
		return
	}
	w.(http.Flusher).Flush()
	select {
	case <-a.Release:
		fmt.Fprintln(w, "second line")
	case <-r.Context().Done():
	}
}

func (a *Agent) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, r, execer{}, r.PathValue("ns")+"/"+r.PathValue("pod"), "", r.PathValue("container"), r.URL.Query()["command"], opts,
		time.Minute, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

func (a *Agent) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeAttach(w, r, execer{}, r.PathValue("ns")+"/"+r.PathValue("pod"), "", r.PathValue("container"), opts,
		time.Minute, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

func (a *Agent) portForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, forwarder{}, r.PathValue("ns")+"/"+r.PathValue("pod"), "", opts,
		time.Minute, 30*time.Second, portforward.SupportedProtocols)
}

// execer runs a few pretend commands: echo ARGS, cat (stdin to stdout), fail (exit 3 with
// a line on stderr), line (one line of stdin to stdout), tty (reports whether a terminal was asked for).
type execer struct{}

func (execer) ExecInContainer(ctx context.Context, name, uid, container string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, timeout time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	switch cmd[0] {
	case "echo":
		fmt.Fprintln(out, strings.Join(cmd[1:], " "))
	case "cat":
		io.Copy(out, in)
	case "line":
		// One line of stdin: WebSocket v4 cannot close stdin (v5 added that), so cat
		// would never end there.
		line, _ := bufio.NewReader(in).ReadString('\n')
		io.WriteString(out, line)
	case "fail":
		fmt.Fprintln(errw, "failing")
		return utilexec.CodeExitError{Err: errors.New("exit status 3"), Code: 3}
	case "tty":
		fmt.Fprintf(out, "%s %s tty=%v\n", name, container, tty)
	default:
		return utilexec.CodeExitError{Err: fmt.Errorf("%s: not found", cmd[0]), Code: 127}
	}
	return nil
}

// AttachContainer greets and then echoes a line of stdin.
func (execer) AttachContainer(ctx context.Context, name, uid, container string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	fmt.Fprintf(out, "attached to %s %s\n", name, container)
	if in != nil {
		line, _ := bufio.NewReader(in).ReadString('\n')
		io.WriteString(out, line)
	}
	return nil
}

// forwarder answers every forwarded connection with "port N\n" and then echoes it.
type forwarder struct{}

func (forwarder) PortForward(ctx context.Context, name, uid string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	fmt.Fprintf(stream, "%s port %d\n", name, port)
	_, err := io.Copy(stream, stream)
	return err
}

// StartPod serves a pod's HTTP server on host, answering "pod METHOD URI"; it returns the
// port. It stops when the test ends.
func StartPod(t testing.TB, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "pod %s %s", r.Method, r.URL.RequestURI())
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// GlobalUnicastIPv4 is an address of this machine that upstream's proxy checks accept (not
// loopback, not link-local), or 127.0.0.1 and false.
func GlobalUnicastIPv4() (string, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String(), true
		}
	}
	return "127.0.0.1", false
}
