package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// TestSlowWatchIsClosedAndResumes: a watch whose client stops reading is ended by closing
// its stream, as kube-apiserver does, not with an ERROR event. client-go's reflector re-lists
// the whole resource after an ERROR (a 500) but watches again from its last resourceVersion
// after a close; that watch is served from the cache's window, which grows past
// --watch-cache-size (1,000) while its events are fresh, so it resumes with the next event
// (no 410) although more than 1,000 events passed since.
func TestSlowWatchIsClosedAndResumes(t *testing.T) {
	cs := clientset(t)
	ns := "slow-watch"
	makeNS(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	first, err := cms.Create(ctxT(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := adminConfig(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	watchFrom := func(rv string) *http.Response {
		t.Helper()
		url := fmt.Sprintf("%s/api/v1/namespaces/%s/configmaps?watch=true&resourceVersion=%s", cfg.Host, ns, rv)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := hc.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("watch from %s: %v %v", rv, res, err)
		}
		return res
	}
	// Nobody reads this one: the HTTP/2 stream's window, then the watcher's channel fill.
	stalled := watchFrom(first.ResourceVersion)
	defer stalled.Body.Close()
	body := strings.Repeat("x", 8<<10)
	create(t, cms, "big", 2500, map[string]string{"x": body})

	var last string
	frames := 0
	seen := map[string]bool{}
	dec := json.NewDecoder(stalled.Body)
	for {
		var f struct {
			Type   string
			Object struct{ Metadata metav1.ObjectMeta }
		}
		if err := dec.Decode(&f); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after %d frames: %v (want the stream closed)", frames, err)
			}
			break
		}
		frames++
		if f.Type != "ADDED" {
			t.Fatalf("frame %d: %s %+v, want only ADDED frames, then the end of the stream", frames, f.Type, f.Object.Metadata)
		}
		last = f.Object.Metadata.ResourceVersion
		seen[f.Object.Metadata.Name] = true
	}
	if frames == 0 || frames >= 2500 {
		t.Fatalf("%d frames before the stream ended: the watch was not ended as too slow", frames)
	}
	// More than the 1,000 events --watch-cache-size keeps at least, then resume.
	create(t, cms, "more", 1200, nil)
	resumed := watchFrom(last)
	defer resumed.Body.Close()
	var f struct {
		Type   string
		Object struct{ Metadata metav1.ObjectMeta }
	}
	err = json.NewDecoder(resumed.Body).Decode(&f)
	if name := f.Object.Metadata.Name; err != nil || f.Type != "ADDED" || !strings.HasPrefix(name, "big-") || seen[name] {
		t.Fatalf("resumed from %s after %d frames: %s %s %v, want ADDED of a big-* the stalled watch did not get", last, frames, f.Type, name, err)
	}
}

// create makes n configmaps prefix-0 … prefix-(n-1), 8 at a time.
func create(t *testing.T, cms typedcorev1.ConfigMapInterface, prefix string, n int, data map[string]string) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}, Data: data}
				if _, err := cms.Create(ctxT(t), cm, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
