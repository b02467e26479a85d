package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// TestApplicationReady: three Components (two by name, one by selector, one depending on
// another) make the Application Ready with its table; the members get its labels.
func TestApplicationReady(t *testing.T) {
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: cart}
spec: {image: example.com/cart:1, exposes: [{port: 8080}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: catalog}
spec: {image: example.com/catalog:1, replicas: 2}
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: checkout, labels: {tier: shop}}
spec:
  image: example.com/checkout:1
  dependsOn: [{kind: Component, name: catalog}]
---
apiVersion: kubeos.dev/v1alpha1
kind: Application
metadata: {name: shop}
spec:
  components: [cart, catalog]
  selector: {matchLabels: {tier: shop}}
`)
	eventually(t, 120*time.Second, func() error {
		app := get(t, &v1alpha1.Application{}, "shop")
		if app.Status.Phase != lifecycle.PhaseActive || app.Status.Ready != "3/3" {
			return fmt.Errorf("application phase %s ready %q rows %+v conditions %+v", app.Status.Phase, app.Status.Ready, app.Status.Components, app.Status.Conditions)
		}
		return nil
	})
	app := get(t, &v1alpha1.Application{}, "shop")
	var names []string
	for _, r := range app.Status.Components {
		names = append(names, r.Name)
		if !r.Ready || r.Phase != lifecycle.PhaseActive {
			t.Errorf("row %+v", r)
		}
	}
	if !slices.Equal(names, []string{"cart", "catalog", "checkout"}) {
		t.Fatalf("rows %v", names)
	}
	for _, n := range names {
		c := get(t, &v1alpha1.Component{}, n)
		if c.Labels["kubeos.dev/application"] != "shop" || c.Labels["app.kubernetes.io/part-of"] != "shop" {
			t.Errorf("component %s labels %v", n, c.Labels)
		}
	}
	// The Component propagates part-of to its workload's pods.
	eventually(t, 30*time.Second, func() error {
		d := get(t, &appsv1.Deployment{}, "cart")
		if d.Spec.Template.Labels["app.kubernetes.io/part-of"] != "shop" {
			return fmt.Errorf("cart pod labels %v", d.Spec.Template.Labels)
		}
		return nil
	})
	// A name that is not a Component name is refused.
	_, errOut, err := kubectl(t, "apiVersion: kubeos.dev/v1alpha1\nkind: Application\nmetadata: {name: bad}\nspec: {components: [other/web]}\n", "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, `The Application "bad" is invalid`) {
		t.Fatalf("components [other/web] accepted: %v %s", err, errOut)
	}
}

// TestApplicationHeldAndDeleted: an Application whose Component waits on a Database that
// cannot be provisioned (no server registered) says so in its table; deleting it deletes
// its Release, Route and Components (the dependent Component first) and keeps the Database
// (deletionPolicy Retain), saying so.
func TestApplicationHeldAndDeleted(t *testing.T) {
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Database
metadata: {name: orders-db}
spec: {}
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: back}
spec:
  image: example.com/back:1
  exposes: [{port: 8080}]
  uses: [{kind: Database, name: orders-db}]
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: front}
spec:
  image: example.com/front:1
  exposes: [{port: 8080}]
  dependsOn: [{kind: Component, name: back}]
---
apiVersion: kubeos.dev/v1alpha1
kind: Application
metadata: {name: store}
spec: {components: [front, back]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: front}
spec: {component: front}
---
apiVersion: kubeos.dev/v1alpha1
kind: Route
metadata: {name: store}
spec:
  hostnames: [store.localtest]
  rules: [{backends: [{component: front, port: 8080}]}]
`)
	eventually(t, 60*time.Second, func() error {
		app := get(t, &v1alpha1.Application{}, "store")
		if app.Status.Ready != "0/2" || len(app.Status.Components) != 2 {
			return fmt.Errorf("application ready %q rows %+v", app.Status.Ready, app.Status.Components)
		}
		back := app.Status.Components[0]
		if back.Name != "back" || back.Ready || !strings.Contains(back.Message, "orders-db") {
			return fmt.Errorf("back row %+v", back)
		}
		if front := app.Status.Components[1]; front.Ready || !strings.Contains(front.Message, "back") {
			return fmt.Errorf("front row %+v", front)
		}
		if app.Status.Phase == lifecycle.PhaseActive {
			return fmt.Errorf("application Active with members not ready")
		}
		return nil
	})
	for _, n := range []string{"front", "back"} {
		eventually(t, 30*time.Second, func() error {
			if c := get(t, &v1alpha1.Component{}, n); c.Labels["kubeos.dev/application"] != "store" {
				return fmt.Errorf("component %s labels %v", n, c.Labels)
			}
			return nil
		})
	}

	// Record the order the Components go in.
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := wc.Watch(ctx, &v1alpha1.ComponentList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var gone []string
	go func() {
		for ev := range w.ResultChan() {
			if c, ok := ev.Object.(*v1alpha1.Component); ok && ev.Type == watch.Deleted {
				mu.Lock()
				gone = append(gone, c.Name)
				mu.Unlock()
			}
		}
	}()

	if out, errOut, err := kubectl(t, "", "delete", "application", "store", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s%s", err, out, errOut)
	}
	eventually(t, 120*time.Second, func() error {
		return errors.Join(notFound(t, &v1alpha1.Application{}, "store"), notFound(t, &v1alpha1.Component{}, "front"),
			notFound(t, &v1alpha1.Component{}, "back"), notFound(t, &v1alpha1.Release{}, "front"), notFound(t, &v1alpha1.Route{}, "store"))
	})
	eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(gone, []string{"front", "back"}) {
			return fmt.Errorf("components deleted in the order %v, want front (which depends on back) first", gone)
		}
		return nil
	})
	if db := get(t, &v1alpha1.Database{}, "orders-db"); db.DeletionTimestamp != nil {
		t.Fatal("the Database is being deleted")
	}
	eventually(t, 30*time.Second, func() error {
		var evs corev1.EventList
		if err := admin.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Application" && e.InvolvedObject.Name == "store" && e.Reason == "Kept" &&
				strings.Contains(e.Message, "kept Database/orders-db (deletionPolicy Retain)") {
				return nil
			}
		}
		return fmt.Errorf("no Kept event for Application store")
	})
}
