package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// target is where requests go: addr, with the Host header host.
type target struct{ name, addr, host string }

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil,
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}}
}

func do(c *http.Client, t target) error {
	req, _ := http.NewRequest(http.MethodGet, "http://"+t.addr+"/", nil)
	req.Host = t.host
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// closedLoop runs conns connections, each sending as soon as answered, for d: requests/s,
// the requests answered and the errors.
func closedLoop(t target, conns int, d time.Duration) (float64, int64, int64) {
	c := newClient(conns)
	defer c.CloseIdleConnections()
	var n, errs atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := do(c, t); err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), n.Load(), errs.Load()
}

// openLoop sends rate requests/s on schedule for d (each from its own goroutine, over a
// pool of keep-alive connections) and returns p50 and p99 latency in ms, measured from the
// scheduled send time (so queueing counts), the requests answered and the errors.
func openLoop(t target, rate int, d time.Duration) (float64, float64, int64, int64) {
	c := newClient(256)
	defer c.CloseIdleConnections()
	// Warm the pool a little so the first requests do not all pay a connect.
	for range 4 {
		_ = do(c, t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	interval := time.Second / time.Duration(rate)
	var mu sync.Mutex
	var lat []float64
	var errs atomic.Int64
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	<-timer.C
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			timer.Reset(w)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			if err := do(c, t); err != nil {
				errs.Add(1)
				return
			}
			ms := float64(time.Since(at).Microseconds()) / 1000
			mu.Lock()
			lat = append(lat, ms)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, 0, 0, errs.Load()
	}
	q := func(p float64) float64 { return round3(lat[min(len(lat)-1, int(p*float64(len(lat))))]) }
	return q(0.50), q(0.99), int64(len(lat)), errs.Load()
}
