package crd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"

	"kubeos.dev/kube/internal/registry"
)

// columns turns additionalPrinterColumns into Table columns computed as upstream's table
// convertor computes them: JSONPath results typed by the column type, date columns as an
// age ("3d4h"). The JSONPaths are parsed on first use.
func columns(defs []apiextensionsv1.CustomResourceColumnDefinition) []registry.Column {
	out := make([]registry.Column, 0, len(defs))
	for _, d := range defs {
		desc := d.Description
		if desc == "" {
			desc = "Custom resource definition column (in JSONPath format): " + d.JSONPath
		}
		col := registry.Column{Name: d.Name, Type: d.Type, Format: d.Format, Description: desc, Priority: d.Priority}
		path := sync.OnceValue(func() *jsonpath.JSONPath {
			p := jsonpath.New(d.Name)
			if err := p.Parse(fmt.Sprintf("{%s}", d.JSONPath)); err != nil {
				return nil
			}
			p.AllowMissingKeys(true)
			return p
		})
		typ := d.Type
		col.CellAt = func(obj *unstructured.Unstructured, now time.Time) any {
			return cell(path(), typ, obj, now)
		}
		out = append(out, col)
	}
	return out
}

func cell(p *jsonpath.JSONPath, typ string, obj *unstructured.Unstructured, now time.Time) any {
	if p == nil {
		return nil
	}
	results, err := p.FindResults(obj.Object)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	value := results[0][0].Interface()
	if value == nil {
		return nil
	}
	switch typ {
	case "string":
		var buf bytes.Buffer
		if err := p.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err != nil {
			return nil
		}
		return buf.String()
	case "integer":
		switch x := value.(type) {
		case int64:
			return x
		case float64:
			return int64(x)
		case json.Number:
			if n, err := x.Int64(); err == nil {
				return n
			}
		}
	case "number":
		switch x := value.(type) {
		case int64:
			return float64(x)
		case float64:
			return x
		case json.Number:
			if f, err := x.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "date":
		if s, ok := value.(string); ok {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return "<invalid>"
			}
			return registry.Since(t, now)
		}
	}
	return nil
}
