package builtin

import (
	"context"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	apitesting "k8s.io/kubernetes/pkg/api/testing"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
)

// roundTripKinds are the kinds the plugins read or change.
var roundTripKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Pod"},
	{Version: "v1", Kind: "Node"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "Namespace"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "PersistentVolume"},
	{Version: "v1", Kind: "ResourceQuota"},
	{Version: "v1", Kind: "LimitRange"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"},
	{Group: "node.k8s.io", Version: "v1", Kind: "RuntimeClass"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
}

// servedObject is a fuzzed object of gvk as the REST handler holds it: v1 content with
// v1 defaults applied, as unstructured.
func servedObject(t *testing.T, gvk schema.GroupVersionKind, seed int64) map[string]any {
	t.Helper()
	in, err := scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		t.Fatal(err)
	}
	fuzzer.FuzzerFor(apitesting.FuzzerFuncs, rand.NewSource(seed), legacyscheme.Codecs).Fill(in)
	ext, err := scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	if err := scheme.Convert(in, ext, nil); err != nil {
		t.Fatal(err)
	}
	scheme.Default(ext)
	ext.GetObjectKind().SetGroupVersionKind(gvk)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ext)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRoundTripKeepsEveryField: served content → internal → served content is the
// identity, for fuzzed objects of every kind the plugins touch.
func TestRoundTripKeepsEveryField(t *testing.T) {
	for _, gvk := range roundTripKinds {
		t.Run(gvk.Kind, func(t *testing.T) {
			for seed := int64(1); seed <= 30; seed++ {
				u := servedObject(t, gvk, seed)
				in, err := toInternal(&unstructured.Unstructured{Object: runtime.DeepCopyJSON(u)}, gvk, true)
				if err != nil {
					t.Fatalf("seed %d: toInternal: %v", seed, err)
				}
				if _, ok := in.(*unstructured.Unstructured); ok {
					t.Fatalf("%v is not converted to its internal type", gvk)
				}
				out, err := fromInternal(in, gvk)
				if err != nil {
					t.Fatalf("seed %d: fromInternal: %v", seed, err)
				}
				if d := cmp.Diff(u, out); d != "" {
					t.Fatalf("seed %d: round trip changed the object (-in +out):\n%s", seed, d)
				}
			}
		})
	}
}

// TestUnknownKindsPassUnstructured: custom resources reach the plugins as they are.
func TestUnknownKindsPassUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}
	in, err := toInternal(u, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if in != u {
		t.Fatalf("got %T, want the unstructured object itself", in)
	}
}

// TestBadContentIsBadRequest: content that does not fit the kind's type is refused with 400.
func TestBadContentIsBadRequest(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": map[string]any{"containers": "nope"}}}
	_, err := toInternal(u, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, true)
	if err == nil || !isBadRequest(err) {
		t.Fatalf("err = %v, want BadRequest", err)
	}
}

// TestConvertAttributes: upstream's attributes carry the request as ours describe it.
func TestConvertAttributes(t *testing.T) {
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "ns"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}}
	binding := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Binding",
		"metadata": map[string]any{"name": "p", "namespace": "ns"}, "target": map[string]any{"kind": "Node", "name": "n1"}}}
	user := &request.User{Name: "system:node:n1", UID: "u1", Groups: []string{"system:nodes"}, Extra: map[string][]string{"k": {"v"}}}
	cases := []struct {
		name     string
		a        admission.Attributes
		wantKind schema.GroupVersionKind
	}{
		{"create", admission.Attributes{Operation: admission.Create, Kind: pod.GroupVersionKind(), Resource: pods, Namespace: "ns", Name: "p", Object: pod, User: user,
			Options: map[string]any{"fieldManager": "kubectl"}}, pod.GroupVersionKind()},
		{"binding", admission.Attributes{Operation: admission.Create, Kind: pod.GroupVersionKind(), Resource: pods, Subresource: "binding", Namespace: "ns", Name: "p", Object: binding, User: user},
			binding.GroupVersionKind()},
		{"delete", admission.Attributes{Operation: admission.Delete, Kind: pod.GroupVersionKind(), Resource: pods, Namespace: "ns", Name: "p", OldObject: pod, User: user, DryRun: true}, pod.GroupVersionKind()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := convert(context.Background(), &tc.a, true)
			if err != nil {
				t.Fatal(err)
			}
			at := c
			if at.GetKind() != tc.wantKind || at.GetResource() != tc.a.Resource || at.GetSubresource() != tc.a.Subresource ||
				at.GetNamespace() != "ns" || at.GetName() != "p" || string(at.GetOperation()) != string(tc.a.Operation) || at.IsDryRun() != tc.a.DryRun {
				t.Fatalf("attributes: %+v", at)
			}
			u := at.GetUserInfo()
			if u.GetName() != user.Name || u.GetUID() != user.UID || cmp.Diff(u.GetGroups(), user.Groups) != "" || cmp.Diff(u.GetExtra(), user.Extra) != "" {
				t.Fatalf("user: %+v", u)
			}
			if tc.a.Object != nil && at.GetObject() == nil || tc.a.OldObject != nil && at.GetOldObject() == nil {
				t.Fatal("objects lost")
			}
			if at.GetOperationOptions() == nil {
				t.Fatal("no operation options")
			}
		})
	}
}
