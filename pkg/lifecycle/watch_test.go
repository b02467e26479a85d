package lifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestWatchDelay: without a Delay each event of a watched object enqueues the mapped object
// at once; with one, a spell of events enqueues it once, after the Delay.
func TestWatchDelay(t *testing.T) {
	app := types.NamespacedName{Namespace: "ns", Name: "app"}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "member"}}
	mapped := func(context.Context, client.Object) []types.NamespacedName { return []types.NamespacedName{app} }
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"at once", 0}, {"after the delay", 100 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h := mapHandler(Watch{Object: &corev1.ConfigMap{}, Map: mapped, Delay: c.delay})
			ctx := context.Background()
			start := time.Now()
			for range 5 {
				h.Update(ctx, event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}, q)
			}
			h.Create(ctx, event.CreateEvent{Object: obj}, q)
			if c.delay > 0 && q.Len() != 0 && time.Since(start) < c.delay {
				t.Fatalf("queued %d before the delay", q.Len())
			}
			deadline := time.Now().Add(5 * time.Second)
			for q.Len() == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := q.Len(); got != 1 {
				t.Fatalf("queue length %d, want 1", got)
			}
			if waited := time.Since(start); waited < c.delay {
				t.Fatalf("queued after %v, want at least %v", waited, c.delay)
			}
			r, _ := q.Get()
			if r.NamespacedName != app {
				t.Fatalf("queued %v, want %v", r.NamespacedName, app)
			}
			q.Done(r)
			time.Sleep(2 * c.delay) // nothing else of that spell may arrive
			if got := q.Len(); got != 0 {
				t.Fatalf("%d more queued after the first", got)
			}
		})
	}
}
