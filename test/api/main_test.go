// Package api tests Kube's HTTP API at the wire: bad input of every sort answered with the
// upstream metav1.Status, metadata-only and Table output, and the server's own endpoints
// (/metrics, /readyz, /version), against one in-process server on embedded etcd.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/server/servertest"
)

var (
	srv *servertest.Server
	// admin is an HTTP client that presents the admin client certificate.
	admin *http.Client
)

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	cfg, err := srv.Config()
	if err == nil {
		admin, err = rest.HTTPClientFor(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin client:", err)
		srv.Stop()
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// adminConfig is a fresh admin client configuration.
func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// response is what a raw request got back.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// do sends one request with the admin client. hdr holds extra headers as "Name: value".
func do(t *testing.T, c *http.Client, method, path, contentType string, body []byte, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

// mustDo is do that fails the test unless the code is want.
func mustDo(t *testing.T, method, path, contentType, body string, want int) response {
	t.Helper()
	r := do(t, admin, method, path, contentType, []byte(body))
	if r.code != want {
		t.Fatalf("%s %s: code %d, want %d: %s", method, path, r.code, want, r.body)
	}
	return r
}

// decodeStatus decodes an error body as a client would and checks the fields every error
// carries.
func decodeStatus(t *testing.T, r response) *metav1.Status {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("body is not a Status: %v: %s", err, r.body)
	}
	if st.Kind != "Status" || st.Status != metav1.StatusFailure || int(st.Code) != r.code {
		t.Errorf("kind %q status %q code %d, want Status/Failure/%d: %s", st.Kind, st.Status, st.Code, r.code, r.body)
	}
	return &st
}
