package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestForward checks what the proxy core does to an exchange, the parts of
// httputil.ReverseProxy's behaviour a client or backend can see: one gateway in front of
// one backend whose handler each case chooses by path.
func TestForward(t *testing.T) {
	ns := "t"
	seen := make(chan *http.Request, 1)
	proceed := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			seen <- r
			w.Header().Set("Connection", "X-Up-Hop")
			w.Header().Set("X-Up-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("X-Up", "kept")
			fmt.Fprintf(w, "got %s", body)
		case "/stream": // one event, then wait until the client has it
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-proceed:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "data: two\n\n")
		case "/trailers":
			w.Header().Set("Trailer", "X-Sum")
			fmt.Fprint(w, "body")
			w.Header().Set("X-Sum", "42")
		case "/hints":
			w.Header().Set("Link", "</app.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			fmt.Fprint(w, "final")
		case "/cut": // promises 100 bytes, sends 10, hangs up
			w.Header().Set("Content-Length", "100")
			fmt.Fprint(w, "0123456789")
			w.(http.Flusher).Flush()
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
		case "/upgrade":
			if r.Header.Get("Upgrade") != "echo" {
				http.Error(w, "no upgrade", 400)
				return
			}
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			brw.Flush()
			line, _ := brw.ReadString('\n')
			fmt.Fprint(brw, "echo: "+line)
			brw.Flush()
		}
	}))
	t.Cleanup(up.Close)
	host, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	services := svcs(ns, "up")
	services[0].Spec.Ports[0].Port = 80
	services[0].Spec.Ports[0].TargetPort.IntVal = 0
	access := &lockedBuffer{}
	g, err := New(Options{Registerer: prometheus.NewRegistry(), AccessLog: access})
	if err != nil {
		t.Fatal(err)
	}
	g.Swap(Compile(Input{Services: services, EndpointSlices: []*discoveryv1.EndpointSlice{endpoints(ns, "up", net.JoinHostPort(host, port))},
		Routes: []*v1alpha1.Route{route(ns, "up", 1, []string{"up.test"}, v1alpha1.RouteRule{
			Backends: []v1alpha1.RouteBackend{{Component: "up", Port: 80}}, Retries: 1})}}))
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	c := gw.Client()
	newReq := func(method, path string, body io.Reader) *http.Request {
		r, _ := http.NewRequest(method, gw.URL+path, body)
		r.Host = "up.test"
		return r
	}

	t.Run("request headers and body", func(t *testing.T) {
		r := newReq("POST", "/echo?x=1&y=2;z=3", strings.NewReader("hello"))
		r.Header.Set("Connection", "X-Hop")
		r.Header.Set("X-Hop", "gone")
		r.Header.Set("Keep-Alive", "timeout=1")
		r.Header.Set("Proxy-Authorization", "Basic x")
		r.Header.Set("Forwarded", "for=6.6.6.6")
		r.Header.Set("X-Forwarded-For", "6.6.6.6")
		r.Header.Set("X-Forwarded-Host", "forged")
		r.Header.Set("X-Kept", "yes")
		r.Header.Set("User-Agent", "") // the Go client sends none then
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "got hello" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		in := <-seen
		for _, h := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization", "Forwarded"} {
			if v, ok := in.Header[h]; ok {
				t.Errorf("upstream got %s: %q", h, v)
			}
		}
		if ua, ok := in.Header["User-Agent"]; ok {
			t.Errorf("upstream got a User-Agent: %q", ua)
		}
		want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "up.test", "X-Forwarded-Proto": "http", "X-Kept": "yes"}
		for h, v := range want {
			if got := in.Header.Values(h); len(got) != 1 || got[0] != v {
				t.Errorf("upstream %s: %q, want %q", h, got, v)
			}
		}
		if in.URL.RawQuery != "x=1" {
			t.Errorf("upstream query %q, want the parsable part x=1", in.URL.RawQuery)
		}
		if in.Host != "up.test" {
			t.Errorf("upstream Host %q", in.Host)
		}
		for _, h := range []string{"X-Up-Hop", "Keep-Alive"} {
			if v, ok := resp.Header[h]; ok {
				t.Errorf("client got %s: %q", h, v)
			}
		}
		if resp.Header.Get("X-Up") != "kept" {
			t.Errorf("client headers %v", resp.Header)
		}
	})

	t.Run("event stream flushed as it comes", func(t *testing.T) {
		resp, err := c.Do(newReq("GET", "/stream", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n') // before the upstream sends its second event
		if err != nil || line != "data: one\n" {
			t.Fatalf("%q %v", line, err)
		}
		close(proceed)
		rest, _ := io.ReadAll(br)
		if string(rest) != "\ndata: two\n\n" {
			t.Fatalf("rest %q", rest)
		}
	})

	t.Run("trailers", func(t *testing.T) {
		resp, err := c.Do(newReq("GET", "/trailers", nil))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "body" || resp.Trailer.Get("X-Sum") != "42" {
			t.Fatalf("%q trailer %v", body, resp.Trailer)
		}
	})

	t.Run("1xx passed on", func(t *testing.T) {
		var hints []string
		r := newReq("GET", "/hints", nil)
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, strconv.Itoa(code)+" "+h.Get("Link"))
				return nil
			}}))
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "final" || len(hints) != 1 || hints[0] != "103 </app.css>; rel=preload" {
			t.Fatalf("%d %q hints %q", resp.StatusCode, body, hints)
		}
		if resp.Header.Get("Link") != "" {
			t.Errorf("the hint's header leaked into the answer: %v", resp.Header)
		}
		// The 103 is not the answer the access log records (the line is written when the
		// handler returns, which may be just after the client has the answer).
		for deadline := time.Now().Add(10 * time.Second); ; {
			g.Flush()
			log, _ := access.get()
			if strings.Contains(log, "path=/hints status=200 ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("access log: %s", log)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("upstream cut mid-body aborts the client's answer", func(t *testing.T) {
		resp, err := c.Do(newReq("GET", "/cut", nil))
		if err != nil { // the connection closed before the buffered headers went out
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("a cut answer read as complete: %q", body)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		conn, err := net.Dial("tcp", gw.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprint(conn, "GET /upgrade HTTP/1.1\r\nHost: up.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d", resp.StatusCode)
		}
		fmt.Fprint(conn, "ping\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "echo: ping\n" {
			t.Fatalf("%q %v", line, err)
		}
	})

}
