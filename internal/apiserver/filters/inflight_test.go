package filters

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/apiserver/request"
)

// anyone authenticates every request as one user; the header X-Test-Masters puts it in
// system:masters.
type anyone struct{}

func (anyone) Authenticate(r *http.Request) (*request.User, bool, error) {
	u := &request.User{Name: "test", Groups: []string{"system:authenticated"}}
	if r.Header.Get("X-Test-Masters") != "" {
		u.Groups = append(u.Groups, "system:masters")
	}
	return u, true, nil
}

// TestInFlightLimit fills the one read-only slot with a blocked request and checks what else
// gets through: other reads get 429 with Retry-After; writes, watches and health checks have
// their own budget or none.
func TestInFlightLimit(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("block") == "1" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(Chain(h, Options{
		Authenticators:      []Authenticator{anyone{}},
		MaxReadOnlyInFlight: 1, MaxMutatingInFlight: 1,
	}))
	defer srv.Close()

	send := func(method, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r := send("GET", "/api/v1/namespaces/a/configmaps?block=1"); r.StatusCode != 200 {
			t.Errorf("blocked read: code %d", r.StatusCode)
		}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the handler")
	}

	for _, path := range []string{"/api/v1/namespaces/a/configmaps/x", "/api/v1/configmaps", "/apis"} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || err != nil || st.Reason != metav1.StatusReasonTooManyRequests || st.Status != metav1.StatusFailure {
			t.Errorf("GET %s over the limit: code %d reason %q (%v), want 429 TooManyRequests", path, resp.StatusCode, st.Reason, err)
		}
		if ra := resp.Header.Get("Retry-After"); ra == "" {
			t.Errorf("GET %s: 429 without Retry-After", path)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/v1/namespaces/a/configmaps"},                // mutating budget
		{"DELETE", "/api/v1/namespaces/a/configmaps/x"},            // mutating budget
		{"GET", "/api/v1/namespaces/a/configmaps?watch=true"},      // watches are not counted
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/livez"}, // probes are not counted
	} {
		if r := send(c.method, c.path); r.StatusCode != http.StatusOK {
			t.Errorf("%s %s while reads are saturated: code %d, want 200", c.method, c.path, r.StatusCode)
		}
	}

	// system:masters is never refused, as in kube-apiserver.
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/configmaps", nil)
	req.Header.Set("X-Test-Masters", "1")
	if resp, err := srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("system:masters over the limit: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	close(release)
	wg.Wait()
	if r := send("GET", "/api/v1/namespaces/a/configmaps"); r.StatusCode != http.StatusOK {
		t.Errorf("read after the slot freed: code %d, want 200", r.StatusCode)
	}
}

// TestMutatingInFlightLimit: a blocked write uses the one mutating slot; the next write gets
// 429, reads still pass.
func TestMutatingInFlightLimit(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PUT" {
			entered <- struct{}{}
			<-release
		}
	})
	srv := httptest.NewServer(Chain(h, Options{Authenticators: []Authenticator{anyone{}}, MaxReadOnlyInFlight: 1, MaxMutatingInFlight: 1}))
	defer srv.Close()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("PUT", srv.URL+"/api/v1/namespaces/a/configmaps/x", strings.NewReader("{}"))
		resp, err := srv.Client().Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-entered
	for _, c := range []struct {
		method string
		want   int
	}{{"PATCH", 429}, {"POST", 429}, {"GET", 200}} {
		req, _ := http.NewRequest(c.method, srv.URL+"/api/v1/namespaces/a/configmaps/y", strings.NewReader("{}"))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s with writes saturated: code %d, want %d", c.method, resp.StatusCode, c.want)
		}
		if c.want == 429 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 429 without Retry-After", c.method)
		}
	}
	close(release)
	if code := <-done; code != 200 {
		t.Errorf("blocked write: code %d", code)
	}
}

// TestBodyLimit: a declared length over the limit is refused before the handler runs; an
// undeclared one is cut at the limit.
func TestBodyLimit(t *testing.T) {
	var read int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Body.Read(buf)
			read += n
			if err != nil {
				break
			}
		}
	})
	srv := httptest.NewServer(Chain(h, Options{Authenticators: []Authenticator{anyone{}}}))
	defer srv.Close()
	body := strings.Repeat("x", 4<<20)
	resp, err := srv.Client().Post(srv.URL+"/api/v1/namespaces/a/configmaps", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || st.Reason != metav1.StatusReasonRequestEntityTooLarge {
		t.Errorf("4 MiB body: code %d reason %q, want 413 RequestEntityTooLarge", resp.StatusCode, st.Reason)
	}
	if read != 0 {
		t.Errorf("the handler read %d bytes of a refused body", read)
	}
}
