package application

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
		c[fmt.Sprintf("HTTP %d %s", code, body)]++
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

// dump logs the namespace's workload state: Deployments, ReplicaSets, pods, the
// Component's and the Release's status and the newest Events (for a failing step).
func dump(t *testing.T, why string) {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintf(&b, "--- state (%s) ---\n", why)
	var deps appsv1.DeploymentList
	_ = admin.List(ctx, &deps, client.InNamespace(ns))
	for _, d := range deps.Items {
		fmt.Fprintf(&b, "deployment %s gen %d/%d strategy %s replicas %d ready %d updated %d unavailable %d %s\n", d.Name, d.Status.ObservedGeneration,
			d.Generation, d.Spec.Strategy.Type, d.Status.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas, d.Status.UnavailableReplicas,
			podTemplate(d.Spec.Template))
	}
	var rss appsv1.ReplicaSetList
	_ = admin.List(ctx, &rss, client.InNamespace(ns))
	for _, r := range rss.Items {
		fmt.Fprintf(&b, "replicaset %s created %s replicas %d ready %d %s\n", r.Name, r.CreationTimestamp.Format(time.TimeOnly),
			ptrOr(r.Spec.Replicas), r.Status.ReadyReplicas, podTemplate(r.Spec.Template))
	}
	var pods corev1.PodList
	_ = admin.List(ctx, &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		ready, why := false, ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				why = cs.State.Waiting.Reason
			}
		}
		fmt.Fprintf(&b, "pod %s track %s phase %s ready %v deleting %v ip %s %s %s\n", p.Name, p.Labels[v1alpha1.LabelTrack], p.Status.Phase, ready,
			p.DeletionTimestamp != nil, p.Status.PodIP, why, p.Spec.Containers[0].Image)
	}
	var c v1alpha1.Component
	if admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &c) == nil {
		fmt.Fprintf(&b, "component web image %s annotations %v status %+v\n", c.Spec.Image, c.Annotations, c.Status)
	}
	var r v1alpha1.Release
	if admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &r) == nil {
		fmt.Fprintf(&b, "release web status %+v\n", r.Status)
	}
	var evs corev1.EventList
	_ = admin.List(ctx, &evs, client.InNamespace(ns))
	slices.SortFunc(evs.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	if len(evs.Items) > 60 {
		evs.Items = evs.Items[len(evs.Items)-60:]
	}
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "event %s %s/%s %s: %s\n", eventTime(e).Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	t.Log(b.String())
}

func podTemplate(p corev1.PodTemplateSpec) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	version := ""
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == "VERSION" {
			version = e.Value
		}
	}
	return fmt.Sprintf("image %s VERSION=%s track %s annotations %v", p.Spec.Containers[0].Image, version, p.Labels[v1alpha1.LabelTrack], p.Annotations)
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
