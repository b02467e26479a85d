// Package api tests Kube's API as clients meet it, in four suites that each start their own
// in-process server on embedded etcd when their first test runs (servertest.Fixture; one
// test binary instead of four, each of which linked the whole server):
//
//   - api (api_*_test.go): the HTTP API at the wire: bad
//     input of every sort answered with the upstream metav1.Status, metadata-only and Table
//     output, and the server's own endpoints (/metrics, /readyz, /version).
//   - clients (clients_*_test.go): unmodified client-go informers and a controller-runtime
//     manager.
//   - crd (crd_*_test.go): CustomResourceDefinitions end to end with kubectl and client-go.
//   - codegen (codegen_*_test.go): the generated typed clients, up to date and working.
//
// Each suite's tests run alone too, e.g. go test -run 'TestCRD|TestConversion' ./test/api/.
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

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

var (
	srv *servertest.Server
	// admin is an HTTP client that presents the admin client certificate.
	admin *http.Client
)

// TestMain stops the suites' fixtures that the chosen tests started; each test names its
// suite's fixture (apiSuite.Need(t) …) in its first line.
func TestMain(m *testing.M) {
	os.Exit(servertest.Main(m, apiSuite, clientsSuite, crdSuite, codegenSuite))
}

var apiSuite = servertest.NewFixture("api", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	// A fixed watch cache of 1,000 events: TestProtobuf pushes a version out of it.
	srv, err = servertest.StartWith(dir, nil, func(o *server.Options) { o.WatchCacheMaxSize = 1000 })
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { srv.Stop() })
	cfg, err := srv.Config()
	if err == nil {
		admin, err = rest.HTTPClientFor(cfg)
	}
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	return nil
})

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
