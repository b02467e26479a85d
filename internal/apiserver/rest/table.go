package rest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// table renders objects as a meta.k8s.io/v1 Table with the kind's columns. Each row carries
// the object (PartialObjectMetadata unless includeObject says otherwise) with kind and
// apiVersion set, which kubectl needs to print it.
func (c *call) table(objs []*unstructured.Unstructured, lm metav1.ListMeta, _ bool) map[string]any {
	if c.kind.TableRows != nil {
		return c.tableFromRows(objs, lm)
	}
	columns := c.kind.TableColumns()
	defs := make([]map[string]any, len(columns))
	for i, col := range columns {
		defs[i] = map[string]any{"name": col.Name, "type": col.Type, "format": col.Format, "description": col.Description, "priority": col.Priority}
	}
	include := c.r.URL.Query().Get("includeObject")
	now := c.h.now()
	rows := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		cells := make([]any, len(columns))
		for i := range columns {
			v := columns[i].Value(o, now)
			if v == nil {
				v = "<none>"
			}
			cells[i] = v
		}
		rows = append(rows, tableRow(cells, o, include))
	}
	return map[string]any{"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": lm, "columnDefinitions": defs, "rows": rows}
}

// tableFromRows is table for kinds that render their own rows (Kind.TableRows).
func (c *call) tableFromRows(objs []*unstructured.Unstructured, lm metav1.ListMeta) map[string]any {
	defs, cells, err := c.kind.TableRows(objs)
	if err != nil || len(cells) != len(objs) {
		// A stored object the printer cannot read still gets a row: its name.
		defs = []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}}
		cells = make([][]any, len(objs))
		for i, o := range objs {
			cells[i] = []any{o.GetName()}
		}
	}
	include := c.r.URL.Query().Get("includeObject")
	rows := make([]map[string]any, 0, len(objs))
	for i, o := range objs {
		rows = append(rows, tableRow(cells[i], o, include))
	}
	return map[string]any{"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": lm, "columnDefinitions": defs, "rows": rows}
}

// tableRow is one row: its cells and the object as includeObject asks (PartialObjectMetadata
// unless told otherwise).
func tableRow(cells []any, o *unstructured.Unstructured, include string) map[string]any {
	row := map[string]any{"cells": cells}
	switch include {
	case "None":
	case "Object":
		row["object"] = o.Object
	default:
		row["object"] = partial(o)
	}
	return row
}
