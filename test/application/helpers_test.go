package application

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// kubectl runs kubectl 1.33 as the tenant's user (PATH has kubectl-kube).
func kubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return servertest.RunKubectl(kubectlBin, t.TempDir(), kubeconfig, stdin, args...)
}

// apply applies yaml as the tenant's user; the test stops when it is refused.
func apply(t *testing.T, yaml string) {
	t.Helper()
	if out, errOut, err := kubectl(t, yaml, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

// eventually polls f until it returns nil (deadline d), reporting the last error.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	servertest.Eventually(t, d, 250*time.Millisecond, f)
}

func get[T client.Object](t *testing.T, obj T, name string) T {
	t.Helper()
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, name, err)
	}
	return obj
}

// notFound is nil when the object is gone.
func notFound(obj client.Object, name string) error {
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%T %s still exists", obj, name)
}

var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: false, MaxIdleConnsPerHost: 4}}

// fetch sends GET path with Host: shop.localtest to the gateway's HTTP port.
func fetch(path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = "shop.localtest"
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// tally counts answers of the gateway: the page's body for 200s, "HTTP <code>" or the
// error otherwise.
type tally map[string]int

func (c tally) add(code int, body string, err error) {
	switch {
	case err != nil:
		c["error: "+err.Error()]++
	case code != http.StatusOK:
		c[fmt.Sprintf("HTTP %d", code)]++
	default:
		c[body]++
	}
}

func (c tally) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// sample sends n requests for / and counts the answers.
func sample(n int) tally {
	c := tally{}
	for range n {
		c.add(fetch("/"))
	}
	return c
}

// activeTimes records when each watched object was first seen Active.
type activeTimes struct {
	mu    sync.Mutex
	first map[string]time.Time // "Kind/name" → time
}

// watchActive watches the kinds' objects of the namespace until ctx ends.
func watchActive(t *testing.T, ctx context.Context) *activeTimes {
	t.Helper()
	at := &activeTimes{first: map[string]time.Time{}}
	lists := map[string]client.ObjectList{
		"Database": &v1alpha1.DatabaseList{}, "Cache": &v1alpha1.CacheList{}, "Volume": &v1alpha1.VolumeList{},
		"Component": &v1alpha1.ComponentList{}, "Route": &v1alpha1.RouteList{}, "Application": &v1alpha1.ApplicationList{},
	}
	for kind, list := range lists {
		w, err := admin.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			t.Fatalf("watch %s: %v", kind, err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				o, ok := ev.Object.(interface {
					client.Object
					LifecycleStatus() *lifecycle.Status
				})
				if !ok || o.LifecycleStatus().Phase != lifecycle.PhaseActive {
					continue
				}
				at.mu.Lock()
				if k := kind + "/" + o.GetName(); at.first[k].IsZero() {
					at.first[k] = time.Now()
				}
				at.mu.Unlock()
			}
		}()
	}
	return at
}

func (a *activeTimes) get(key string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first[key]
}
