package workload

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserviceetcd "k8s.io/kube-aggregator/pkg/registry/apiservice/etcd"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
)

// tables is upstream's table generator with kube-apiserver's printers (the columns of
// `kubectl get`: READY, STATUS computed as upstream, ...).
var tables = sync.OnceValue(func() *printers.HumanReadableGenerator {
	return printers.NewTableGenerator().With(printersinternal.AddHandlers)
})

// convertors are the kinds whose columns upstream prints outside pkg/printers: kube-aggregator's
// APIService (its REST storage's ConvertToTable, which uses nothing of the storage).
var convertors = map[schema.GroupKind]interface {
	ConvertToTable(ctx context.Context, obj, opts runtime.Object) (*metav1.Table, error)
}{
	{Group: "apiregistration.k8s.io", Kind: "APIService"}: &apiserviceetcd.REST{},
}

// generateTable is upstream's table of one internal object (or an empty list of them).
func generateTable(gk schema.GroupKind, in runtime.Object, opts printers.GenerateOptions) (*metav1.Table, error) {
	if c, ok := convertors[gk]; ok {
		return c.ConvertToTable(context.Background(), in, nil)
	}
	return tables().GenerateTable(in, opts)
}

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
			if _, ok := convertors[gvk.GroupKind()]; ok {
				empty, err = scheme.New(schema.GroupVersionKind{Group: gvk.Group, Version: runtime.APIVersionInternal, Kind: gvk.Kind + "List"})
				if err != nil {
					return nil, nil, err
				}
			}
			t, err := generateTable(gvk.GroupKind(), empty, opts)
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
			t, err := generateTable(gvk.GroupKind(), in, opts)
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
