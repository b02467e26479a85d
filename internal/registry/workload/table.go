package workload

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
)

// tables is upstream's table generator with kube-apiserver's printers (the columns of
// `kubectl get`: READY, STATUS computed as upstream, ...).
var tables = sync.OnceValue(func() *printers.HumanReadableGenerator {
	return printers.NewTableGenerator().With(printersinternal.AddHandlers)
})

// tableRows renders objects of version gvk with upstream's printer for the kind. The server
// generates every column; kubectl shows those with priority > 0 only with -o wide.
func tableRows(gvk schema.GroupVersionKind) func(objs []*unstructured.Unstructured) ([]metav1.TableColumnDefinition, [][]any, error) {
	opts := printers.GenerateOptions{Wide: true}
	return func(objs []*unstructured.Unstructured) ([]metav1.TableColumnDefinition, [][]any, error) {
		if len(objs) == 0 {
			empty, err := scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
			if err != nil {
				return nil, nil, err
			}
			t, err := tables().GenerateTable(empty, opts)
			if err != nil {
				return nil, nil, err
			}
			return t.ColumnDefinitions, nil, nil
		}
		var defs []metav1.TableColumnDefinition
		rows := make([][]any, 0, len(objs))
		for _, o := range objs {
			in, err := toInternal(o.Object, gvk)
			if err != nil {
				return nil, nil, err
			}
			t, err := tables().GenerateTable(in, opts)
			if err != nil {
				return nil, nil, err
			}
			defs = t.ColumnDefinitions
			if len(t.Rows) == 0 {
				rows = append(rows, []any{o.GetName()})
				continue
			}
			rows = append(rows, t.Rows[0].Cells)
		}
		return defs, rows, nil
	}
}
