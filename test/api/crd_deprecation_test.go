package api

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// warningLog is a rest.WarningHandler that keeps the warnings' texts.
type warningLog struct {
	mu    sync.Mutex
	texts []string
}

func (l *warningLog) HandleWarningHeader(_ int, _, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.texts = append(l.texts, text)
}

// take returns the warnings received since the last take.
func (l *warningLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.texts
	l.texts = nil
	return out
}

const gizmosCRD = `{"metadata":{"name":"gizmos.deprec.example.com"},"spec":{"group":"deprec.example.com","scope":"Namespaced",
	"names":{"plural":"gizmos","kind":"Gizmo"},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":false,"deprecated":true,"subresources":{"status":{}},
	  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
	 {"name":"v1beta1","served":true,"storage":false,"deprecated":true,"deprecationWarning":"gizmos v1beta1 goes away in 2027",
	  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
	 {"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
	  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// TestDeprecatedVersionWarning: every request to a deprecated version of a CRD — reads,
// watches, writes, the status subresource, requests that fail — carries its warning: the
// default text or the CRD's own; requests to the version that is not deprecated carry none.
// kubectl prints it.
func TestDeprecatedVersionWarning(t *testing.T) {
	crdSuite.Need(t)
	ext, _, cfg := clients(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crdFromJSON(t, gizmosCRD), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "gizmos.deprec.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	log := &warningLog{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = log
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gizmos := func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "deprec.example.com", Version: version, Resource: "gizmos"}).Namespace("default")
	}
	const defaultText = "deprec.example.com/v1alpha1 Gizmo is deprecated; use deprec.example.com/v1 Gizmo"

	// Each step is one request; the error is ignored when the step is meant to fail.
	steps := []struct {
		name string
		do   func(c dynamic.ResourceInterface, version string) error
	}{
		{"create", func(c dynamic.ResourceInterface, version string) error {
			_, err := c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "deprec.example.com/" + version, "kind": "Gizmo",
				"metadata": map[string]any{"name": "g-" + version}, "spec": map[string]any{"size": int64(1)}}}, metav1.CreateOptions{})
			return err
		}},
		{"get", func(c dynamic.ResourceInterface, version string) error {
			_, err := c.Get(ctx, "g-"+version, metav1.GetOptions{})
			return err
		}},
		{"list", func(c dynamic.ResourceInterface, _ string) error {
			_, err := c.List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch", func(c dynamic.ResourceInterface, _ string) error {
			w, err := c.Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"update", func(c dynamic.ResourceInterface, version string) error {
			o, err := c.Get(ctx, "g-"+version, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_ = unstructured.SetNestedField(o.Object, int64(2), "spec", "size")
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
			return err
		}},
		{"patch", func(c dynamic.ResourceInterface, version string) error {
			_, err := c.Patch(ctx, "g-"+version, types.MergePatchType, []byte(`{"spec":{"size":3}}`), metav1.PatchOptions{})
			return err
		}},
		{"status", func(c dynamic.ResourceInterface, version string) error {
			_, err := c.Patch(ctx, "g-"+version, types.MergePatchType, []byte(`{"status":{"ready":true}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"get of a missing object", func(c dynamic.ResourceInterface, _ string) error {
			_, _ = c.Get(ctx, "missing", metav1.GetOptions{})
			return nil
		}},
		{"delete", func(c dynamic.ResourceInterface, version string) error {
			return c.Delete(ctx, "g-"+version, metav1.DeleteOptions{})
		}},
	}
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{"v1alpha1", []string{defaultText}},
		{"v1", nil},
	} {
		c := gizmos(tc.version)
		log.take()
		for _, st := range steps {
			if err := st.do(c, tc.version); err != nil {
				t.Fatalf("%s %s: %v", tc.version, st.name, err)
			}
			// The update step makes two requests (get, put); each carries the warning.
			got := slices.Compact(log.take())
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: warnings %q, want %q", tc.version, st.name, got, tc.want)
			}
		}
	}
	if _, err := gizmos("v1beta1").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); !slices.Equal(got, []string{"gizmos v1beta1 goes away in 2027"}) {
		t.Errorf("v1beta1 list: warnings %q, want the CRD's deprecationWarning", got)
	}

	bin, err := findKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	k := &kubectlRun{t: t, bin: bin, home: t.TempDir()}
	if out := k.ok("", "get", "gizmos.v1alpha1.deprec.example.com", "-n", "default"); !strings.Contains(out, "Warning: "+defaultText) {
		t.Errorf("kubectl get of a deprecated version prints no warning:\n%s", out)
	}
	if out := k.ok("", "get", "gizmos.v1.deprec.example.com", "-n", "default"); strings.Contains(out, "Warning:") {
		t.Errorf("kubectl get of v1 prints a warning:\n%s", out)
	}
}
