package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

const gearsCRD = `{"metadata":{"name":"gears.select.example.com"},"spec":{"group":"select.example.com","scope":"Namespaced",
	"names":{"plural":"gears","singular":"gear","kind":"Gear"},
	"versions":[{"name":"v1","served":true,"storage":true,
	 "selectableFields":[{"jsonPath":".spec.color"},{"jsonPath":".spec.teeth"},{"jsonPath":".spec.oiled"}],
	 "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{
	   "color":{"type":"string"},"teeth":{"type":"integer"},"oiled":{"type":"boolean"}}}}}}}]}}`

// TestSelectableFields: spec.versions[].selectableFields work in field selectors on custom
// resources — kubectl get (a list from etcd), a list from the watch cache and a client-go
// watch (an object that stops matching arrives as DELETED, one that starts as ADDED) — and
// any other field label is refused with 400 "field label not supported".
func TestSelectableFields(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 90*time.Second)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crdFromJSON(t, gearsCRD), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), "gears.select.example.com", metav1.DeleteOptions{}) })
	waitCondition(t, ext, "gears.select.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gears := dyn.Resource(schema.GroupVersionResource{Group: "select.example.com", Version: "v1", Resource: "gears"}).Namespace("default")

	w, err := gears.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.color=red"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	gear := func(name, color string, teeth int64, oiled bool) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "select.example.com/v1", "kind": "Gear",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"color": color, "teeth": teeth, "oiled": oiled}}}
	}
	for _, g := range []*unstructured.Unstructured{gear("a", "red", 12, true), gear("b", "blue", 8, false), gear("c", "red", 20, false)} {
		if _, err := gears.Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for _, v := range []string{"1.27", "1.33"} {
		t.Run("kubectl-"+v, func(t *testing.T) {
			bin, err := findKubectl(v)
			if err != nil {
				t.Fatal(err)
			}
			k := &kubectlRun{t: t, bin: bin, home: t.TempDir()}
			for sel, want := range map[string]string{
				"spec.color=red":                  "gear.select.example.com/a gear.select.example.com/c",
				"spec.color!=red":                 "gear.select.example.com/b",
				"spec.teeth=8":                    "gear.select.example.com/b",
				"spec.oiled=true":                 "gear.select.example.com/a",
				"spec.color=red,spec.oiled=false": "gear.select.example.com/c",
				"metadata.name=c":                 "gear.select.example.com/c",
				"spec.color=green":                "",
			} {
				if got := strings.Join(strings.Fields(k.ok("", "get", "gears", "-n", "default", "--field-selector", sel, "-o", "name")), " "); got != want {
					t.Errorf("--field-selector %s: %q, want %q", sel, got, want)
				}
			}
			k.fails("", []string{"field label not supported: spec.size"}, "get", "gears", "-n", "default", "--field-selector", "spec.size=1")
		})
	}

	// A list served by the watch cache (resourceVersion=0) filters the same way.
	list, err := gears.List(ctx, metav1.ListOptions{FieldSelector: "spec.color=red", ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); got != "a c" {
		t.Errorf("list from the cache: %q, want %q", got, "a c")
	}
	_, err = gears.List(ctx, metav1.ListOptions{FieldSelector: "spec.size=1"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: spec.size") {
		t.Errorf("unsupported field label: err = %v, want 400 field label not supported: spec.size", err)
	}
	if _, err := gears.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.size=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("watch with an unsupported field label: err = %v, want 400", err)
	}

	// The watch: the red ones, then only what changes in or out of red, in order.
	next := func() string {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("watch event %s: %T", ev.Type, ev.Object)
			}
			color, _, _ := unstructured.NestedString(u.Object, "spec", "color")
			return fmt.Sprintf("%s %s %s", ev.Type, u.GetName(), color)
		case <-ctx.Done():
			t.Fatal("no watch event before the test's deadline")
		}
		return ""
	}
	first := []string{next(), next()}
	sort.Strings(first)
	if want := []string{"ADDED a red", "ADDED c red"}; strings.Join(first, ",") != strings.Join(want, ",") {
		t.Fatalf("first watch events %q, want %q", first, want)
	}
	setColor := func(name, color string) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"color":%q}}`, color)
		if _, err := gears.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setColor("c", "blue")  // stops matching
	setColor("b", "red")   // starts matching
	setColor("c", "green") // still not matching: no event
	if _, err := gears.Patch(ctx, "a", "application/merge-patch+json", []byte(`{"spec":{"teeth":13}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err) // still matching
	}
	setColor("b", "green") // stops matching
	if err := gears.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"DELETED c red", // with the last state that matched
		"ADDED b red",
		"MODIFIED a red",
		"DELETED b red",
		"DELETED a red",
	} {
		if got := next(); got != want {
			t.Fatalf("watch event %q, want %q", got, want)
		}
	}
}

func names(items []unstructured.Unstructured) string {
	var out []string
	for _, it := range items {
		out = append(out, it.GetName())
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// linksCRD is hostsCRD's shape (the same webhook converts it) with selectable fields that
// differ between the versions: spec.host in v1alpha1 (stored), spec.address in v1.
const linksCRD = `{"metadata":{"name":"links.conv.example.com"},"spec":{"group":"conv.example.com","scope":"Namespaced",
	"names":{"plural":"links","kind":"Link"},
	"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"url":%q,"caBundle":%q}}},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":true,"selectableFields":[{"jsonPath":".spec.host"}],
	  "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"integer"}}}}}}},
	 {"name":"v1","served":true,"storage":false,"selectableFields":[{"jsonPath":".spec.address"}],
	  "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"address":{"type":"string"}}}}}}}]}}`

// TestSelectableFieldsAcrossVersions: a version's selectable fields are read from the
// object in that version — converted by the CRD's webhook when it is stored in another —
// as kube-apiserver, which filters objects after conversion.
func TestSelectableFieldsAcrossVersions(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 60*time.Second)
	hook := &conversionWebhook{}
	hook.mode.Store("ok")
	caPEM, cert := selfSignedTLS(t)
	ts := httptest.NewUnstartedServer(hook)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	defer ts.Close()
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crdFromJSON(t, fmt.Sprintf(linksCRD, ts.URL+"/convert", b64(caPEM))), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), "links.conv.example.com", metav1.DeleteOptions{}) })
	waitCondition(t, ext, "links.conv.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	links := func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "conv.example.com", Version: version, Resource: "links"}).Namespace("default")
	}
	for name, host := range map[string]string{"db": "db.internal", "cache": "cache.internal"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conv.example.com/v1alpha1", "kind": "Link",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"host": host, "port": int64(5432)}}}
		if _, err := links("v1alpha1").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ version, selector, want string }{
		{"v1alpha1", "spec.host=db.internal", "db"},
		{"v1", "spec.address=db.internal:5432", "db"},
		{"v1", "spec.address!=db.internal:5432", "cache"},
	} {
		for _, rv := range []string{"", "0"} { // from etcd, from the watch cache
			list, err := links(tt.version).List(ctx, metav1.ListOptions{FieldSelector: tt.selector, ResourceVersion: rv})
			if err != nil {
				t.Fatalf("%s %s: %v", tt.version, tt.selector, err)
			}
			if got := names(list.Items); got != tt.want {
				t.Errorf("%s --field-selector %s (resourceVersion %q): %q, want %q", tt.version, tt.selector, rv, got, tt.want)
			}
		}
	}
	// Each version supports its own labels only.
	if _, err := links("v1").List(ctx, metav1.ListOptions{FieldSelector: "spec.host=db.internal"}); !apierrors.IsBadRequest(err) {
		t.Errorf("v1 with v1alpha1's field: err = %v, want 400", err)
	}

	// A watch from a list's resourceVersion, as kubectl wait and informers do.
	sel := metav1.ListOptions{FieldSelector: "spec.address=db.internal:5432"}
	list, err := links("v1").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	sel.ResourceVersion = list.GetResourceVersion()
	w, err := links("v1").Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expect := func(want string) {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("watch event %s: %T", ev.Type, ev.Object)
			}
			address, _, _ := unstructured.NestedString(u.Object, "spec", "address")
			if got := fmt.Sprintf("%s %s %s", ev.Type, u.GetName(), address); got != want {
				t.Fatalf("watch event %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no %q event before the test's deadline", want)
		}
	}
	setPort := func(name string, port int64) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"port":%d}}`, port)
		if _, err := links("v1alpha1").Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPort("cache", 6379) // never matches: no event
	setPort("db", 6432)    // stops matching
	setPort("db", 5432)    // matches again
	expect("DELETED db db.internal:5432")
	expect("ADDED db db.internal:5432")
}
