package lifecycle

// The lifecyclemem suite runs the lifecycle engine on the default in-memory event bus (the
// lifecycle suite uses Redis): a Tenant's transitions reach a subscriber in order.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/eventbus"
	"kubeos.dev/kube/pkg/lifecycle"
)

var memSrv *servertest.Server

var memSuite = servertest.NewFixture("lifecyclemem", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	if memSrv, err = servertest.Start(dir, nil); err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() {
		memSrv.Stop()
		os.RemoveAll(dir)
	})
	return nil
})

func TestTransitionsOnTheMemoryBus(t *testing.T) {
	memSuite.Need(t)
	var mu sync.Mutex
	var seen []eventbus.Event
	if err := memSrv.Inner().EventBus().Subscribe(eventbus.Subscription{Topic: lifecycle.Topic, Group: "test", Handler: func(_ context.Context, ev eventbus.Event) error {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := memSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	tenants := dyn.Resource(schema.GroupVersionResource{Group: "kubeos.dev", Version: "v1alpha1", Resource: "tenants"})
	tenant := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Tenant",
		"metadata": map[string]any{"name": "mem"}, "spec": map[string]any{"environments": []any{"dev"}}}}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := tenants.Create(ctx, tenant, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create tenant: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // the kubeos.dev CRDs are installed at start
	}
	active := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		path := ""
		for _, ev := range seen {
			if ev.Kind != "Tenant" || ev.Name != "mem" || ev.Type != lifecycle.EventPhaseChanged {
				continue
			}
			if ev.TraceID == "" {
				return "event without a trace id", false
			}
			path += ev.From + "→" + ev.To + " "
			if ev.To == "Active" {
				return path, true
			}
		}
		return path, false
	}
	for {
		path, ok := active()
		if ok {
			t.Logf("transitions on the memory bus: %s", path)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no transition to Active on the memory bus within 30 s; seen: %q", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
