package workload

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// BenchmarkAggregatedGet measures what Kube's aggregation layer adds to a request (issue
// 21's goal: p99 no more than 1 ms above calling the extension server directly): each
// iteration GETs the same flunder once from sample-apiserver itself and once through Kube
// (authentication, authorization, flow control, the proxy with the front-proxy identity),
// in alternating order, both as the admin over kept-alive HTTP/2 connections. It reports
// the p50 and p99 of each side and the difference of the p99s. Run it with a fixed count:
//
//	go test -run '^$' -bench BenchmarkAggregatedGet -benchtime 3000x ./test/workload/
func BenchmarkAggregatedGet(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sample := startSampleAPIServer(b, ctx, "wardle-bench")
	sample.register(b, ctx, "v1alpha1")
	kubeCfg, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	const path = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/bench"
	viaKube := newGetter(b, kubeCfg, path)
	direct := newGetter(b, sample.directConfig(b), path)
	if code, body := viaKube.do(ctx, http.MethodPost, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
		`{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"bench"},"spec":{"reference":"x"}}`); code != http.StatusCreated && code != http.StatusConflict {
		b.Fatalf("create flunder: %d %s", code, body)
	}
	b.Cleanup(func() { viaKube.do(context.Background(), http.MethodDelete, path, "") })
	for range 200 { // warm both sides' connections and caches
		direct.get(b, ctx)
		viaKube.get(b, ctx)
	}
	var d, k []time.Duration
	i := 0
	for b.Loop() { // the setup above runs once: b.Loop calls this function once
		i++
		if i%2 == 0 {
			d = append(d, direct.get(b, ctx))
			k = append(k, viaKube.get(b, ctx))
		} else {
			k = append(k, viaKube.get(b, ctx))
			d = append(d, direct.get(b, ctx))
		}
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	dp50, dp99, kp50, kp99 := percentile(d, 50), percentile(d, 99), percentile(k, 50), percentile(k, 99)
	b.ReportMetric(ms(dp50), "direct-p50-ms")
	b.ReportMetric(ms(dp99), "direct-p99-ms")
	b.ReportMetric(ms(kp50), "kube-p50-ms")
	b.ReportMetric(ms(kp99), "kube-p99-ms")
	b.ReportMetric(ms(kp50-dp50), "added-p50-ms")
	b.ReportMetric(ms(kp99-dp99), "added-p99-ms")
}

func percentile(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

// getter sends requests to one server with one client.
type getter struct {
	hc   *http.Client
	host string
	path string
}

func newGetter(b *testing.B, cfg *rest.Config, path string) *getter {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return &getter{hc: hc, host: strings.TrimSuffix(cfg.Host, "/"), path: path}
}

func (g *getter) do(ctx context.Context, method, path, body string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, method, g.host+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// get GETs the flunder and returns how long it took, the body read.
func (g *getter) get(b *testing.B, ctx context.Context) time.Duration {
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.host+g.path, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s%s: %d", g.host, g.path, resp.StatusCode)
	}
	return took
}
