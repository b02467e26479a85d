package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// TestApplicationReady: three Components (two by name, one by selector, one depending on
// another) make the Application Ready with its table; the members get its labels.
func TestApplicationReady(t *testing.T) {
	releaseSuite.Need(t)
	dumpOnFailure(t, admin, ns, &releaseLog)
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
	releaseEventually(t, 120*time.Second, func() error {
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
	releaseEventually(t, 30*time.Second, func() error {
		d := get(t, &appsv1.Deployment{}, "cart")
		if d.Spec.Template.Labels["app.kubernetes.io/part-of"] != "shop" {
			return fmt.Errorf("cart pod labels %v", d.Spec.Template.Labels)
		}
		return nil
	})
	// A name that is not a Component name is refused.
	_, errOut, err := releaseKubectl(t, "apiVersion: kubeos.dev/v1alpha1\nkind: Application\nmetadata: {name: bad}\nspec: {components: [other/web]}\n", "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, `The Application "bad" is invalid`) {
		t.Fatalf("components [other/web] accepted: %v %s", err, errOut)
	}
}

// TestApplicationHeldAndDeleted: an Application whose Component waits on a Database that
// cannot be provisioned (no server registered) says so in its table; deleting it deletes
// its Release, Route and Components (the dependent Component first) and keeps the Database
// (deletionPolicy Retain), saying so.
func TestApplicationHeldAndDeleted(t *testing.T) {
	releaseSuite.Need(t)
	dumpOnFailure(t, admin, ns, &releaseLog)
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
	releaseEventually(t, 60*time.Second, func() error {
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
		releaseEventually(t, 30*time.Second, func() error {
			if c := get(t, &v1alpha1.Component{}, n); c.Labels["kubeos.dev/application"] != "store" {
				return fmt.Errorf("component %s labels %v", n, c.Labels)
			}
			return nil
		})
	}

	// The Route waits for its backend before it first serves: front is held on the
	// Database (so it has no Service yet), and the Route is Reconciling and says so (it refers to front; the engine
	// holds it only while front does not exist, the driver until front is first Active).
	releaseEventually(t, 30*time.Second, func() error {
		r := get(t, &v1alpha1.Route{}, "store")
		c := meta.FindStatusCondition(r.Status.Conditions, lifecycle.ConditionReconciling)
		if r.Status.Phase == lifecycle.PhaseActive || c == nil || (c.Reason != "BackendsNotActive" && c.Reason != "BackendNotFound") || !strings.Contains(c.Message, "front") {
			return fmt.Errorf("route store: phase %s conditions %+v", r.Status.Phase, r.Status.Conditions)
		}
		return nil
	})

	// kube ctl tree: the Release and the Route are drawn under their Component (they
	// reference it), the Components under the Application (its members) and the Database
	// under back.
	checkTree(t)

	// Record, in etcd's order (resourceVersion), when each object's deletion is issued
	// and when it is gone.
	seq := watchDeletions(t, &v1alpha1.ComponentList{}, &v1alpha1.ReleaseList{}, &v1alpha1.RouteList{}, &v1alpha1.ApplicationList{})

	if out, errOut, err := releaseKubectl(t, "", "delete", "application", "store", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s%s", err, out, errOut)
	}
	releaseEventually(t, 120*time.Second, func() error {
		return errors.Join(notFound(t, &v1alpha1.Application{}, "store"), notFound(t, &v1alpha1.Component{}, "front"),
			notFound(t, &v1alpha1.Component{}, "back"), notFound(t, &v1alpha1.Release{}, "front"), notFound(t, &v1alpha1.Route{}, "store"))
	})
	// Each deletion is issued only once what must go first is gone: the Release and the
	// Route before front, front (which depends on back) before back, and the Application
	// outlives them all.
	releaseEventually(t, 10*time.Second, func() error {
		steps := seq()
		at := func(what string) int {
			if i := slices.Index(steps, what); i >= 0 {
				return i
			}
			return 1 << 30
		}
		for _, w := range []string{"deleting Application/store", "gone Application/store", "gone Release/front", "gone Route/store",
			"deleting Component/front", "gone Component/front", "deleting Component/back", "gone Component/back"} {
			if at(w) == 1<<30 {
				return fmt.Errorf("no %q in %v", w, steps)
			}
		}
		for _, before := range [][2]string{
			{"gone Release/front", "deleting Component/front"},
			{"gone Route/store", "deleting Component/front"},
			{"gone Component/front", "deleting Component/back"},
			{"gone Component/back", "gone Application/store"},
			{"deleting Application/store", "deleting Release/front"},
		} {
			if at(before[0]) > at(before[1]) {
				t.Errorf("%q after %q; the deletions in etcd's order: %v", before[0], before[1], steps)
			}
		}
		t.Logf("  deletions in etcd's order: %v", steps)
		return nil
	})
	if db := get(t, &v1alpha1.Database{}, "orders-db"); db.DeletionTimestamp != nil {
		t.Fatal("the Database is being deleted")
	}
	releaseEventually(t, 30*time.Second, func() error {
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

// checkTree: `kubectl kube tree application/store` draws front and back under the
// Application, the Release front and the Route store under the Component front and the
// Database under back.
func checkTree(t *testing.T) {
	t.Helper()
	out, errOut, err := releaseKubectl(t, "", "kube", "tree", "application/store")
	if err != nil {
		t.Fatalf("kubectl kube tree application/store: %v\n%s%s", err, out, errOut)
	}
	t.Logf("  kubectl kube tree application/store:\n%s", out)
	type row struct {
		depth      int
		name, kind string
	}
	var rows []row
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		line = strings.Replace(line, " (↑ shown above)", "", 1) // a back-reference
		rest := strings.TrimLeft(line, "│├└─ ")
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		// Each level is two columns of drawing ("├─", "│ ", "  ") before the name.
		depth := len([]rune(line[:len(line)-len(rest)])) / 2
		rows = append(rows, row{depth, f[0], f[1]})
	}
	parent := func(i int) row {
		for j := i - 1; j >= 0; j-- {
			if rows[j].depth < rows[i].depth {
				return rows[j]
			}
		}
		return row{}
	}
	want := map[string]string{"Component/front": "Application/store", "Release/front": "Component/front", "Route/store": "Component/front",
		"Component/back": "Component/front", "Database/orders-db": "Component/back"}
	got := map[[2]string]bool{}
	for i, r := range rows {
		if p := parent(i); p.name != "" {
			got[[2]string{r.kind + "/" + r.name, p.kind + "/" + p.name}] = true
		}
	}
	for child, p := range want {
		if !got[[2]string{child, p}] {
			t.Errorf("tree: %s not drawn under %s; tree:\n%s", child, p, out)
		}
	}
}

// watchDeletions watches the lists' kinds in the namespace and returns what it saw so far
// in etcd's order: "deleting Kind/name" when a deletionTimestamp first appears, "gone
// Kind/name" when the object is deleted.
func watchDeletions(t *testing.T, lists ...client.ObjectList) func() []string {
	t.Helper()
	cfg, err := releaseSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	type step struct {
		rv   uint64
		what string
	}
	var (
		mu    sync.Mutex
		steps []step
		seen  = map[string]bool{}
	)
	for _, l := range lists {
		w, err := wc.Watch(ctx, l, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				o, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				kinds, _, err := admin.Scheme().ObjectKinds(o)
				if err != nil || len(kinds) == 0 {
					continue
				}
				key := kinds[0].Kind + "/" + o.GetName()
				rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
				mu.Lock()
				switch {
				case ev.Type == watch.Deleted:
					steps = append(steps, step{rv, "gone " + key})
				case o.GetDeletionTimestamp() != nil && !seen[key]:
					seen[key] = true
					steps = append(steps, step{rv, "deleting " + key})
				}
				mu.Unlock()
			}
		}()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		s := slices.Clone(steps)
		slices.SortStableFunc(s, func(a, b step) int { return cmp.Compare(a.rv, b.rv) })
		out := make([]string, len(s))
		for i, x := range s {
			out[i] = x.what
		}
		return out
	}
}

// TestApplicationAfterItsHeldComponents: an Application created after its Components are
// already held (on a Database that cannot be provisioned) still gets its table: the
// Components' events all came before the engine saw the Application, so no later member
// event writes it (before the fix it stayed without rows until a member changed).
func TestApplicationAfterItsHeldComponents(t *testing.T) {
	releaseSuite.Need(t)
	dumpOnFailure(t, admin, ns, &releaseLog)
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Database
metadata: {name: late-db}
spec: {}
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: late-back}
spec:
  image: example.com/back:1
  uses: [{kind: Database, name: late-db}]
`)
	releaseEventually(t, 60*time.Second, func() error {
		c := get(t, &v1alpha1.Component{}, "late-back")
		if dc := meta.FindStatusCondition(c.Status.Conditions, lifecycle.ConditionDependenciesReady); dc == nil || dc.Status != "False" {
			return fmt.Errorf("component late-back not held: %+v", c.Status.Conditions)
		}
		return nil
	})
	apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Application
metadata: {name: late}
spec: {components: [late-back]}
`)
	releaseEventually(t, 20*time.Second, func() error {
		app := get(t, &v1alpha1.Application{}, "late")
		if app.Status.Ready != "0/1" || len(app.Status.Components) != 1 || !strings.Contains(app.Status.Components[0].Message, "late-db") {
			return fmt.Errorf("application ready %q rows %+v", app.Status.Ready, app.Status.Components)
		}
		return nil
	})
	if out, errOut, err := releaseKubectl(t, "", "delete", "application", "late", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s%s", err, out, errOut)
	}
}
