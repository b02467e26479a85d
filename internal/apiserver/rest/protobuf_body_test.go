package rest

import (
	"bytes"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"kubeos.dev/kube/internal/registry"
)

// TestProtobufBodyAsJSON checks that a protobuf body of every built-in kind decodes into the
// same unstructured object as its JSON encoding would: decodeBody converts the Go object
// directly, and must not differ from the JSON round trip it replaces.
func TestProtobufBodyAsJSON(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 2).MaxDepth(8).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1e6), resource.DecimalSI)
		},
		func(x *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*x = intstr.FromInt32(c.Int31())
			} else {
				*x = intstr.FromString(c.String(5))
			}
		},
		func(x *runtime.RawExtension, c randfill.Continue) {
			if c.Bool() {
				x.Raw = []byte(`{"apiVersion":"v1","kind":"X","n":3,"f":1.5,"l":[1,"a",null],"m":{}}`)
			}
		},
		func(x *metav1.FieldsV1, c randfill.Continue) { x.Raw = []byte(`{"f:data":{".":{},"f:a":{}}}`) },
		func(tm *metav1.Time, c randfill.Continue) {
			if c.Bool() {
				*tm = metav1.Unix(c.Int63n(1<<32), 0)
			}
		},
		func(tm *metav1.MicroTime, c randfill.Continue) {
			if c.Bool() {
				*tm = metav1.NewMicroTime(metav1.Unix(c.Int63n(1<<32), c.Int63n(1e9)).Time)
			}
		},
	)
	for _, k := range registry.Builtins() {
		if k.NewTyped == nil {
			continue
		}
		for i := range 50 {
			obj := k.NewTyped()
			f.Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(k.GVK())
			var body bytes.Buffer
			if err := protoSerializer.Encode(obj, &body); err != nil {
				t.Fatalf("%s: encode: %v", k.Kind, err)
			}
			got, data, err := decodeBody("application/vnd.kubernetes.protobuf", body.Bytes(), true)
			if err != nil || data != nil {
				t.Fatalf("%s: decodeBody: %v (data %q)", k.Kind, err, data)
			}
			viaJSON, err := bodyJSON("application/vnd.kubernetes.protobuf", body.Bytes(), true)
			if err != nil {
				t.Fatalf("%s: bodyJSON: %v", k.Kind, err)
			}
			want, err := decodeObject(viaJSON)
			if err != nil {
				t.Fatalf("%s: decodeObject: %v", k.Kind, err)
			}
			if !reflect.DeepEqual(got.Object, want.Object) {
				t.Fatalf("%s #%d: direct conversion differs from JSON\ngot  %#v\nwant %#v", k.Kind, i, got.Object, want.Object)
			}
		}
	}
}

// BenchmarkDecodeProtobufBody decodes a typed client's configmap body: straight into the
// unstructured form (decodeBody), and through JSON text as before (bodyJSON, decodeObject).
func BenchmarkDecodeProtobufBody(b *testing.B) {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm-00001", Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"key": "value", "n": "cm-00001"},
	}
	var body bytes.Buffer
	if err := protoSerializer.Encode(cm, &body); err != nil {
		b.Fatal(err)
	}
	const ct = "application/vnd.kubernetes.protobuf"
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := decodeBody(ct, body.Bytes(), true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("via-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, err := bodyJSON(ct, body.Bytes(), true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := decodeObject(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
