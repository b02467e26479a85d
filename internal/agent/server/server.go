package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
)

// Pods is what the server needs of the pod manager.
type Pods interface {
	Pods() []*corev1.Pod
	Container(ctx context.Context, ns, pod, container string, previous bool) (id, logPath string, running bool, err error)
}

// Options configure the server.
type Options struct {
	// Addr is the listen address (host:port; port 0 picks one).
	Addr string
	// NodeName is the node the authorisation checks name.
	NodeName string
	// ClientCA verifies callers' client certificates.
	ClientCA *x509.CertPool
	// CertDir keeps the self-signed serving certificate.
	CertDir string
	// Hosts are the names and addresses the serving certificate names.
	Hosts []string
	// Client makes TokenReviews and SubjectAccessReviews (auth.go); required.
	Client kubernetes.Interface
	Pods   Pods
	// Runtime is the CRI runtime (streaming, sandboxes, log checks).
	Runtime internalapi.RuntimeService
	// Volumes are the node's local-path volume directories (volumes.go); nil: none.
	Volumes Volumes
	// Debug are read-only handlers by path (GET), authorised as nodes/proxy like the
	// kubelet's /debug: the Service proxy's /debug/services.
	Debug map[string]http.Handler
	// Stats measures the node for /stats/summary, /metrics/resource and /metrics/cadvisor
	// (stats.go); Metrics are the agent's own metrics for /metrics. nil: not served.
	Stats   Stats
	Metrics prometheus.Gatherer
	Log     *slog.Logger
}

// Server is the running API.
type Server struct {
	opts Options
	ln   net.Listener
	auth *auth
}

// Listen opens the listener; Serve serves on it.
func Listen(o Options) (*Server, error) {
	a, err := newAuth(o.NodeName, o.ClientCA, o.Client)
	if err != nil {
		return nil, err
	}
	cert, err := servingCert(o.CertDir, o.Hosts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("agent server: %w", err)
	}
	tlsLn := tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		// As the kubelet: a certificate is verified by the authenticator (a bad one is a
		// 401, not a failed handshake), and a caller may send a bearer token instead.
		ClientAuth: tls.RequestClientCert,
		ClientCAs:  o.ClientCA,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	})
	return &Server{opts: o, ln: tlsLn, auth: a}, nil
}

// Port is the port listened on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Serve serves until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.logs)
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", s.exec)
	mux.HandleFunc("/exec/{ns}/{pod}/{uid}/{container}", s.exec)
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", s.attach)
	mux.HandleFunc("/attach/{ns}/{pod}/{uid}/{container}", s.attach)
	mux.HandleFunc("/portForward/{ns}/{pod}", s.portForward)
	mux.HandleFunc("/portForward/{ns}/{pod}/{uid}", s.portForward)
	s.volumeRoutes(mux)
	s.statsRoutes(mux)
	for path, h := range s.opts.Debug {
		mux.Handle("GET "+path, h)
	}
	srv := &http.Server{Handler: s.auth.filter(mux), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	err := srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range s.opts.Pods.Pods() {
		list.Items = append(list.Items, *p)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&list)
}

// LogOptions decodes the kubelet's containerLogs query. Pure.
func LogOptions(q url.Values, now time.Time) (opts *logs.LogOptions, previous bool, err error) {
	b := func(k string) bool { v, _ := strconv.ParseBool(q.Get(k)); return v }
	i := func(k string) (*int64, error) {
		v := q.Get(k)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q is not a non-negative integer", k, v)
		}
		return &n, nil
	}
	opts = &logs.LogOptions{Follow: b("follow"), Timestamp: b("timestamps")}
	if opts.TailLines, err = i("tailLines"); err != nil {
		return nil, false, err
	}
	if opts.LimitBytes, err = i("limitBytes"); err != nil {
		return nil, false, err
	}
	since, err := i("sinceSeconds")
	if err != nil {
		return nil, false, err
	}
	if since != nil {
		opts.Since = now.Add(-time.Duration(*since) * time.Second)
	}
	if st := q.Get("sinceTime"); st != "" {
		t, err := time.Parse(time.RFC3339, st)
		if err != nil {
			return nil, false, fmt.Errorf("sinceTime: %w", err)
		}
		opts.Since = t
	}
	return opts, b("previous"), nil
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	opts, previous, err := LogOptions(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	id, path, _, err := s.opts.Pods.Container(r.Context(), ns, pod, container, previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := os.Stat(path); err != nil {
		http.Error(w, fmt.Sprintf("failed to open log file %q: %v", path, err), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	if err := logs.ReadLogs(r.Context(), path, id, opts, s.opts.Runtime, fw, fw); err != nil && r.Context().Err() == nil {
		s.opts.Log.Debug("read logs", "container", id, "err", err)
	}
}

type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	_ = f.rc.Flush()
	return n, err
}

func boolQ(q url.Values, k string) bool {
	v, _ := strconv.ParseBool(q.Get(k))
	return v
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := s.runningContainer(w, r)
	if !ok {
		return
	}
	cmd := q["command"]
	if len(cmd) == 0 {
		http.Error(w, "you must specify at least 1 command", http.StatusBadRequest)
		return
	}
	resp, err := s.opts.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: boolQ(q, "tty"),
		Stdin: boolQ(q, "input") || boolQ(q, "stdin"), Stdout: boolQ(q, "output") || boolQ(q, "stdout"), Stderr: boolQ(q, "error") || boolQ(q, "stderr")})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := s.runningContainer(w, r)
	if !ok {
		return
	}
	resp, err := s.opts.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id, Tty: boolQ(q, "tty"),
		Stdin: boolQ(q, "input") || boolQ(q, "stdin"), Stdout: boolQ(q, "output") || boolQ(q, "stdout"), Stderr: boolQ(q, "error") || boolQ(q, "stderr")})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

func (s *Server) runningContainer(w http.ResponseWriter, r *http.Request) (string, bool) {
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	id, _, running, err := s.opts.Pods.Container(r.Context(), ns, pod, container, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "", false
	}
	if !running {
		http.Error(w, fmt.Sprintf("container %s is not running", container), http.StatusBadRequest)
		return "", false
	}
	return id, true
}

func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	sbs, err := s.opts.Runtime.ListPodSandbox(r.Context(), &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod},
	})
	if err != nil || len(sbs) == 0 {
		http.Error(w, fmt.Sprintf("pod %s/%s has no running sandbox", ns, pod), http.StatusNotFound)
		return
	}
	resp, err := s.opts.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sbs[0].Id})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

// proxyStream hands the upgrade to the runtime's streaming server, as the kubelet does.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// An upgrade request has no body, but one forwarded by the API server arrives chunked
	// (its body reader wrapped): the runtime's streaming server would read the chunked
	// terminator as the first SPDY bytes. Drain it and forward none.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	r.Body, r.ContentLength, r.TransferEncoding = http.NoBody, 0, nil
	r.Header.Del("Content-Length")
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{s.opts.Log})
	h.ServeHTTP(w, r)
}

type responder struct{ log *slog.Logger }

func (r responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	r.log.Debug("stream proxy", "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// servingCert loads or makes the self-signed serving certificate in dir.
func servingCert(dir string, hosts []string) (tls.Certificate, error) {
	certFile, keyFile := filepath.Join(dir, "agent.crt"), filepath.Join(dir, "agent.key")
	if c, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return c, nil
	}
	var ips []net.IP
	var names []string
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			names = append(names, h)
		}
	}
	first := "kube-agent"
	if len(hosts) > 0 {
		first = hosts[0]
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(first, ips, names)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent serving certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
