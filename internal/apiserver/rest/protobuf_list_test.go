package rest

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientscheme "k8s.io/client-go/kubernetes/scheme"

	"kubeos.dev/kube/internal/registry"
)

func configMapKind(t testing.TB) *registry.Kind {
	for _, k := range registry.Builtins() {
		if k.Resource == "configmaps" {
			return k
		}
	}
	t.Fatal("no configmaps kind")
	return nil
}

// testConfigMap is the i-th configmap of a test list. Every call gets a resourceVersion of
// its own: the encoding memo rightly takes one name at one resourceVersion to be one content.
func testConfigMap(i, dataBytes int) *unstructured.Unstructured {
	testRV++
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("cm-%04d", i), "namespace": "ns", "resourceVersion": strconv.Itoa(testRV)},
		"data":     map[string]any{"k": strings.Repeat("x", dataBytes)},
	}}
}

var testRV = 1000

// TestStreamProtoList: the streamed list is byte for byte the list message built whole and
// enveloped, for lists that fit in one chunk, span many, and hold an item larger than a
// chunk; client-go's protobuf decoder reads it back item for item.
func TestStreamProtoList(t *testing.T) {
	kind := configMapKind(t)
	cases := []struct {
		name        string
		n, dataSize int
	}{
		{"empty", 0, 0},
		{"one", 1, 10},
		{"500 small, many chunks", 500, 300},
		{"an item larger than a chunk", 3, listChunk + 100},
		{"items around the chunk size", 4, listChunk - 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var items []*unstructured.Unstructured
			for i := 0; i < tc.n; i++ {
				items = append(items, testConfigMap(i, tc.dataSize))
			}
			lm := metav1.ListMeta{ResourceVersion: "4242", Continue: "c"}
			encode := func(it *unstructured.Unstructured) ([]byte, error) { return protoObject(kind, it, true) }

			// The reference: the list message built whole, then enveloped.
			meta, _ := lm.Marshal()
			body := protowire.AppendTag(nil, 1, protowire.BytesType)
			body = protowire.AppendBytes(body, meta)
			for _, it := range items {
				raw, err := encode(it)
				if err != nil {
					t.Fatal(err)
				}
				body = protowire.AppendTag(body, 2, protowire.BytesType)
				body = protowire.AppendBytes(body, raw)
			}
			want, err := envelope("v1", "ConfigMapList", body)
			if err != nil {
				t.Fatal(err)
			}

			rec := httptest.NewRecorder()
			if err := streamProtoList(rec, "v1", "ConfigMapList", lm, items, encode); err != nil {
				t.Fatal(err)
			}
			got := rec.Body.Bytes()
			if !bytes.Equal(got, want) {
				t.Fatalf("streamed %d bytes, want %d; differ", len(got), len(want))
			}
			if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
				t.Fatalf("Content-Length %s, body %d", cl, len(want))
			}
			var list corev1.ConfigMapList
			s := protobuf.NewSerializer(clientscheme.Scheme, clientscheme.Scheme)
			if _, _, err := s.Decode(got, nil, &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != tc.n || list.ResourceVersion != "4242" {
				t.Fatalf("decoded %d items at %q", len(list.Items), list.ResourceVersion)
			}
			for i, cm := range list.Items {
				if cm.Name != fmt.Sprintf("cm-%04d", i) || len(cm.Data["k"]) != tc.dataSize {
					t.Fatalf("item %d: %s with %d bytes", i, cm.Name, len(cm.Data["k"]))
				}
			}
		})
	}
}

// TestProtoObjectMemo: an object encoded once is found again; the same object changed in
// place (a new resourceVersion) is encoded anew; its PartialObjectMetadata is kept apart.
func TestProtoObjectMemo(t *testing.T) {
	kind := configMapKind(t)
	decode := func(b []byte) *corev1.ConfigMap {
		var cm corev1.ConfigMap
		if err := cm.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		return &cm
	}
	obj := testConfigMap(1, 5)
	first, err := protoObject(kind, obj, true)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := protoObject(kind, obj, true)
	if &first[0] != &again[0] {
		t.Fatal("the second encoding of the same object was not remembered")
	}

	obj.Object["data"] = map[string]any{"k": "changed"}
	obj.SetResourceVersion("999")
	changed, _ := protoObject(kind, obj, true)
	if got := decode(changed); got.Data["k"] != "changed" || got.ResourceVersion != "999" {
		t.Fatalf("changed object encoded as %v at %s", got.Data, got.ResourceVersion)
	}

	partial, err := protoPartial(kind, obj, true)
	if err != nil {
		t.Fatal(err)
	}
	var pom metav1.PartialObjectMetadata
	if err := pom.Unmarshal(partial); err != nil || pom.Name != "cm-0001" || pom.ResourceVersion != "999" {
		t.Fatalf("partial %v %v", pom.ObjectMeta, err)
	}
	if full, _ := protoObject(kind, obj, true); &full[0] != &changed[0] {
		t.Fatal("the partial encoding displaced the full one")
	}
}

// BenchmarkStreamProtoList500 is the list500 of bench/api.sh on the encoding side: 500
// configmaps already encoded once, streamed again.
func BenchmarkStreamProtoList500(b *testing.B) {
	kind := configMapKind(b)
	var items []*unstructured.Unstructured
	for i := 0; i < 500; i++ {
		items = append(items, testConfigMap(i, 200))
	}
	encode := func(it *unstructured.Unstructured) ([]byte, error) { return protoObject(kind, it, true) }
	lm := metav1.ListMeta{ResourceVersion: "4242"}
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		rec.Body = bytes.NewBuffer(make([]byte, 0, 256<<10))
		if err := streamProtoList(rec, "v1", "ConfigMapList", lm, items, encode); err != nil {
			b.Fatal(err)
		}
	}
}
