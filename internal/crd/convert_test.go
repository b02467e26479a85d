package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// TestReviewVersion: the first of conversionReviewVersions Kube speaks; none is an error.
func TestReviewVersion(t *testing.T) {
	for _, tc := range []struct {
		versions []string
		want     string
	}{
		{[]string{"v1"}, "v1"},
		{[]string{"v1beta1"}, "v1beta1"},
		{[]string{"v1beta1", "v1"}, "v1beta1"},
		{[]string{"v2", "v1", "v1beta1"}, "v1"},
		{[]string{"v2"}, ""},
		{nil, ""},
	} {
		got, err := reviewVersion(tc.versions)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("reviewVersion(%q) = %q, %v; want %q", tc.versions, got, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "conversionReviewVersions") {
			t.Errorf("reviewVersion(%q): error %q does not name the field", tc.versions, err)
		}
	}
}

// TestEncodeReview: the request is a ConversionReview of the version chosen.
func TestEncodeReview(t *testing.T) {
	objs := []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Widget"}`)}}
	for _, v := range []string{"v1", "v1beta1"} {
		data, err := encodeReview(v, "u1", "example.com/v2", objs)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"apiVersion": "apiextensions.k8s.io/" + v, "kind": "ConversionReview",
			"request": map[string]any{"uid": "u1", "desiredAPIVersion": "example.com/v2",
				"objects": []any{map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"}}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s request: %s", v, data)
		}
	}
}

// TestDecodeReview: a v1 answer must be a v1 ConversionReview for the request's uid; a
// v1beta1 answer is checked for neither, as kube-apiserver; a failure carries the
// webhook's message.
func TestDecodeReview(t *testing.T) {
	const ok = `"response":{"uid":"u1","result":{"status":"Success"},"convertedObjects":[{"kind":"Widget"}]}`
	for _, tc := range []struct {
		name, version, answer string
		err                   string // "" = success
	}{
		{"v1", "v1", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",` + ok + `}`, ""},
		{"v1 without apiVersion", "v1", `{` + ok + `}`, `want an apiextensions.k8s.io/v1 ConversionReview`},
		{"v1 answered in v1beta1", "v1", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview",` + ok + `}`, `apiVersion "apiextensions.k8s.io/v1beta1"`},
		{"v1 other uid", "v1", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"u2","result":{"status":"Success"}}}`, `uid "u2" does not match`},
		{"v1 no response", "v1", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, "no response"},
		{"v1beta1", "v1beta1", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview",` + ok + `}`, ""},
		{"v1beta1 without apiVersion or uid", "v1beta1", `{"response":{"result":{"status":"Success"},"convertedObjects":[{"kind":"Widget"}]}}`, ""},
		{"v1beta1 no response", "v1beta1", `{}`, "no response"},
		{"failure with a message", "v1", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"u1","result":{"status":"Failure","message":"v3 is gone"}}}`, "refused the conversion: v3 is gone"},
		{"failure without a message", "v1beta1", `{"response":{"uid":"u1","result":{"status":"Failure"}}}`, `refused the conversion: result.status "Failure"`},
		{"garbage", "v1", `<html>`, "not a ConversionReview"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := decodeReview(tc.version, types.UID("u1"), []byte(tc.answer))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err == "" && (len(objs) != 1 || string(objs[0].Raw) != `{"kind":"Widget"}`):
				t.Fatalf("objects %v", objs)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// TestRestoreMetadata: the converted object gets the original's metadata but for labels and
// annotations, which the webhook may change if they stay valid.
func TestRestoreMetadata(t *testing.T) {
	original := func() *unstructured.Unstructured {
		return obj(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"d","uid":"u","generation":2,
			"finalizers":["f"],"labels":{"a":"1"},"annotations":{"n":"x"}}}`)
	}
	for _, tc := range []struct {
		name     string
		metadata string // the webhook's metadata
		want     string // the converted object's metadata; "" when err is set
		err      string
	}{
		{"unchanged", `{"name":"w","namespace":"d","uid":"u","generation":2,"finalizers":["f"],"labels":{"a":"1"},"annotations":{"n":"x"}}`,
			`{"name":"w","namespace":"d","uid":"u","generation":2,"finalizers":["f"],"labels":{"a":"1"},"annotations":{"n":"x"}}`, ""},
		{"other fields restored", `{"name":"w","generation":9,"finalizers":[],"resourceVersion":"7","bogus":true,"labels":{"a":"1"},"annotations":{"n":"x"}}`,
			`{"name":"w","namespace":"d","uid":"u","generation":2,"finalizers":["f"],"labels":{"a":"1"},"annotations":{"n":"x"}}`, ""},
		{"labels and annotations changed", `{"labels":{"a":"2","b":"3"},"annotations":{"example.com/converted":"yes"}}`,
			`{"name":"w","namespace":"d","uid":"u","generation":2,"finalizers":["f"],"labels":{"a":"2","b":"3"},"annotations":{"example.com/converted":"yes"}}`, ""},
		{"labels and annotations dropped", `{"labels":null}`,
			`{"name":"w","namespace":"d","uid":"u","generation":2,"finalizers":["f"]}`, ""},
		{"invalid label key", `{"labels":{"bad key!":"1"}}`, "", `metadata.labels: Invalid value: "bad key!"`},
		{"invalid label value", `{"labels":{"a":"not valid!"}}`, "", `metadata.labels: Invalid value: "not valid!"`},
		{"invalid annotation key", `{"annotations":{"-x-":"1"}}`, "", `metadata.annotations: Invalid value: "-x-"`},
		{"label not a string", `{"labels":{"a":1}}`, "", `metadata.labels[a] is a int64, not a string`},
		{"labels not a map", `{"labels":["a"]}`, "", `metadata.labels is a []interface {}, not an object`},
		{"metadata missing", ``, "", "metadata is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := original()
			conv := obj(`{"apiVersion":"example.com/v2","kind":"Widget","spec":{"x":1}}`)
			if tc.metadata != "" {
				conv.Object["metadata"] = obj(tc.metadata).Object
			}
			err := restoreMetadata(in, conv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := obj(tc.want).Object; !reflect.DeepEqual(conv.Object["metadata"], want) {
				t.Errorf("metadata %v, want %v", conv.Object["metadata"], want)
			}
			if !reflect.DeepEqual(in.Object, original().Object) {
				t.Errorf("the original object changed: %v", in.Object)
			}
			if conv.GetAPIVersion() != "example.com/v2" || conv.Object["spec"] == nil {
				t.Errorf("more than metadata changed: %v", conv.Object)
			}
		})
	}
}

// gadgetCRD has strategy None and two versions whose schemas differ: v1 has spec.replicas,
// v1alpha1 has not; v1 defaults spec.mode.
const gadgetCRD = `{"metadata":{"name":"gadgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
	"names":{"plural":"gadgets","kind":"Gadget"},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":%t,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
	   "properties":{"size":{"type":"integer"}}}}}}},
	 {"name":"v1","served":true,"storage":%t,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
	   "properties":{"size":{"type":"integer"},"replicas":{"type":"integer"},"mode":{"type":"string","default":"fast"}}}}}}}]}}`

// TestConversionPrunesWithTargetSchema: with strategy None, an object converted for storage
// is pruned with the storage version's schema, one converted on read with the request
// version's; stored objects are never changed, and a read that converts nothing and
// defaults nothing returns them as they are.
func TestConversionPrunesWithTargetSchema(t *testing.T) {
	ctx := context.Background()
	t.Run("write to v1, stored in v1alpha1", func(t *testing.T) {
		kinds := compileJSON(t, fmt.Sprintf(gadgetCRD, true, false))
		v1alpha1, v1 := kinds[0], kinds[1]
		in := obj(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g","namespace":"d"},"spec":{"size":1,"replicas":3}}`)
		stored, err := v1.ToStorage(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"apiVersion":"example.com/v1alpha1","kind":"Gadget","metadata":{"name":"g","namespace":"d"},"spec":{"size":1}}`; !reflect.DeepEqual(stored.Object, obj(want).Object) {
			t.Errorf("stored %v, want %s", stored.Object, want)
		}
		// Read back in v1: converted, defaulted; no replicas.
		snapshot := stored.DeepCopy()
		out, err := v1.FromStorage(ctx, []*unstructured.Unstructured{stored})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g","namespace":"d"},"spec":{"size":1,"mode":"fast"}}`; !reflect.DeepEqual(out[0].Object, obj(want).Object) {
			t.Errorf("read in v1 %v, want %s", out[0].Object, want)
		}
		// Read in the storage version: no conversion, no defaults, the same object.
		objs := []*unstructured.Unstructured{stored}
		out, err = v1alpha1.FromStorage(ctx, objs)
		if err != nil || out[0] != stored {
			t.Errorf("read in the storage version: %v %v, want the stored object itself", out, err)
		}
		if !reflect.DeepEqual(stored.Object, snapshot.Object) || objs[0] != stored {
			t.Errorf("the stored object or the caller's slice changed: %v", stored.Object)
		}
	})
	t.Run("stored in v1, read in v1alpha1", func(t *testing.T) {
		kinds := compileJSON(t, fmt.Sprintf(gadgetCRD, false, true))
		v1alpha1, v1 := kinds[0], kinds[1]
		in := obj(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g","namespace":"d"},"spec":{"size":1,"replicas":3,"bogus":true}}`)
		stored, err := v1.ToStorage(ctx, in)
		if err != nil || stored != in {
			t.Fatalf("write in the storage version: %v %v, want the object itself", stored, err)
		}
		if want := `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g","namespace":"d"},"spec":{"size":1,"replicas":3,"mode":"fast"}}`; !reflect.DeepEqual(stored.Object, obj(want).Object) {
			t.Errorf("stored %v, want %s", stored.Object, want)
		}
		snapshot := stored.DeepCopy()
		other := obj(`{"apiVersion":"example.com/v1alpha1","kind":"Gadget","metadata":{"name":"h","namespace":"d"},"spec":{"size":2}}`)
		objs := []*unstructured.Unstructured{stored, other}
		out, err := v1alpha1.FromStorage(ctx, objs)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"apiVersion":"example.com/v1alpha1","kind":"Gadget","metadata":{"name":"g","namespace":"d"},"spec":{"size":1}}`; !reflect.DeepEqual(out[0].Object, obj(want).Object) {
			t.Errorf("read in v1alpha1 %v, want %s", out[0].Object, want)
		}
		if out[1] != other {
			t.Errorf("an object already in v1alpha1 was copied: %v", out[1])
		}
		if !reflect.DeepEqual(stored.Object, snapshot.Object) || objs[0] != stored {
			t.Errorf("the stored object or the caller's slice changed: %v", stored.Object)
		}
		// A read in v1 of an object stored in v1 is only defaulted, on a copy.
		out, err = v1.FromStorage(ctx, objs[:1])
		if err != nil || out[0] == stored || objs[0] != stored {
			t.Errorf("defaulting read: %v %v; it must copy the stored object and leave the caller's slice", out, err)
		}
	})
}

// TestWebhookWithoutSupportedReviewVersion: a CRD whose conversionReviewVersions Kube does
// not speak fails conversions with an error that says so, without calling anything.
func TestWebhookWithoutSupportedReviewVersion(t *testing.T) {
	kinds := compileJSON(t, `{"metadata":{"name":"gadgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
	"names":{"plural":"gadgets","kind":"Gadget"},
	"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v2"],"clientConfig":{"url":"https://127.0.0.1:1/convert"}}},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}},
	 {"name":"v1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`)
	stored := obj(`{"apiVersion":"example.com/v1alpha1","kind":"Gadget","metadata":{"name":"g"}}`)
	_, err := kinds[1].FromStorage(context.Background(), []*unstructured.Unstructured{stored})
	if err == nil || !strings.Contains(err.Error(), `conversionReviewVersions ["v2"] has no version Kube supports (v1, v1beta1)`) {
		t.Errorf("err = %v", err)
	}
}

func obj(s string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal([]byte(s), &u.Object); err != nil {
		panic(err)
	}
	return u
}
