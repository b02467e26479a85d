package registry

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// chain is a recursive type, as some built-in types are (through pointers).
type chain struct {
	Next  *chain `json:"next,omitempty"`
	Count int32  `json:"count,omitempty"`
}

func TestCheckTypesPaths(t *testing.T) {
	deep := map[string]any{"count": "x"}
	for range 30 {
		deep = map[string]any{"next": deep}
	}
	tests := []struct {
		name string
		v    any
		typ  reflect.Type
		root *field.Path
		want []string // "path: message", in order (one map key at most per object)
	}{
		{"ok", map[string]any{"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "y"}}, "data": map[string]any{"k": "v"}},
			reflect.TypeFor[*corev1.ConfigMap](), nil, nil},
		{"fields from the root", map[string]any{"metadata": map[string]any{"name": 5, "generation": "1"}, "immutable": "yes"},
			reflect.TypeFor[*corev1.ConfigMap](), nil,
			[]string{`metadata.name: Invalid value: 5: must be a string`, `metadata.generation: Invalid value: "1": must be an integer`, `immutable: Invalid value: "yes": must be a boolean`}},
		{"map value", map[string]any{"data": map[string]any{"a": 5.5}}, reflect.TypeFor[*corev1.ConfigMap](), nil,
			[]string{`data[a]: Invalid value: 5.5: must be a string`}},
		{"list item below a root path", map[string]any{"finalizers": []any{"a", 1}}, reflect.TypeFor[corev1.NamespaceSpec](), field.NewPath("spec"),
			[]string{`spec.finalizers[1]: Invalid value: 1: must be a string`}},
		{"list below a nil root", []any{"a", true}, reflect.TypeFor[[]string](), nil,
			[]string{`[][1]: Invalid value: true: must be a string`}},
		{"time", map[string]any{"creationTimestamp": "yesterday"}, objectMetaType, field.NewPath("metadata"),
			[]string{`metadata.creationTimestamp: Invalid value: "yesterday": must be an RFC 3339 date-time`}},
		{"int32 range", map[string]any{"count": int64(1) << 40}, reflect.TypeFor[chain](), nil,
			[]string{`count: Invalid value: 1099511627776: must fit in a 32-bit integer`}},
		{"recursive and deep", deep, reflect.TypeFor[chain](), nil,
			[]string{strings.Repeat("next.", 30) + `count: Invalid value: "x": must be an integer`}},
		{"bytes", map[string]any{"binaryData": map[string]any{"b": "!!"}}, reflect.TypeFor[*corev1.ConfigMap](), nil,
			[]string{`binaryData[b]: Invalid value: "<value redacted>": must be base64-encoded: illegal base64 data at input byte 0`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range checkTypes(tc.v, tc.typ, tc.root) {
				got = append(got, e.Field+": "+e.ErrorBody())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// BenchmarkValidateConfigMap is the validation of a configmap create and update.
func BenchmarkValidateConfigMap(b *testing.B) {
	cm := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm-000001", "namespace": "bench", "labels": map[string]any{"app": "bench"},
				"uid": "00000000-0000-0000-0000-000000000000", "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "123"},
			"data": map[string]any{"key": "value", "n": "cm-000001"},
		}}
	}
	s := configMapKind().StrategyOrDefault()
	obj, old := cm(), cm()
	b.Run("create", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs := s.Validate(obj); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
	b.Run("update", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs := s.ValidateUpdate(obj, old); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
}
