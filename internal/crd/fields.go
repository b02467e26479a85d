package crd

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/jsonpath"
)

// attrs is the version's Kind.Attrs: the labels, and the fields a field selector may name
// as upstream's custom resource strategy (GetAttrs) offers them — metadata.name,
// metadata.namespace for namespaced resources only, and the version's selectableFields,
// valued as upstream values them: a string as is, an integer or a boolean as its text, ""
// when absent. The REST handler learns from it which field labels the resource supports
// (any other is refused with "field label not supported"), and list and watch, from etcd or
// the watch cache, filter with it.
func (vs *version) attrs(obj *unstructured.Unstructured) (labels.Set, fields.Set) {
	set := fields.Set{"metadata.name": obj.GetName()}
	if vs.c.crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		set["metadata.namespace"] = obj.GetNamespace()
	}
	if sfs := vs.selectableFields(); len(sfs) > 0 {
		content := vs.inVersion(obj)
		for _, sf := range sfs {
			set[sf.name] = sf.value(content)
		}
	}
	return labels.Set(obj.GetLabels()), set
}

// inVersion is the content of obj, an object as stored, in this version, for its
// selectable fields. Only a conversion webhook can move fields between versions (strategy
// None changes nothing but apiVersion), so only then is an object stored in another
// version converted — one webhook call per object filtered; nil if the call fails, which
// leaves the selectable fields empty (upstream leaves the object out of the result).
// Read-time defaults are not applied: an object written after a default was added to the
// schema is stored with it.
func (vs *version) inVersion(obj *unstructured.Unstructured) map[string]any {
	av := obj.GetAPIVersion()
	conv := vs.c.crd.Spec.Conversion
	if av == "" || av == vs.apiVersion() || conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter {
		return obj.Object
	}
	out, err := vs.c.converter().convert(context.Background(), []*unstructured.Unstructured{obj}, vs.apiVersion())
	if err != nil {
		return nil
	}
	return out[0].Object
}

// selectableFields parses the version's selectableFields on first use.
func (vs *version) selectableFields() []*selectableField {
	vs.fieldsOnce.Do(func() {
		for _, f := range vs.v.SelectableFields {
			vs.fields = append(vs.fields, newSelectableField(f.JSONPath))
		}
	})
	return vs.fields
}

// selectableField is one of spec.versions[].selectableFields: its field label (the
// JSONPath without its leading dot, as upstream names it) and how to read it.
type selectableField struct {
	name string
	// steps is the path as map keys, when it is a plain field path: validation admits no
	// other. It is read without the JSONPath machinery, which is not safe for concurrent
	// use (filters run in parallel).
	steps []string
	// path is any other path that parses (a CRD stored without validation), evaluated as
	// upstream does, one evaluation at a time; nil with steps nil: the path does not parse
	// and the field is always "".
	mu   sync.Mutex
	path *jsonpath.JSONPath
}

func newSelectableField(path string) *selectableField {
	sf := &selectableField{name: strings.TrimPrefix(path, ".")}
	tree, err := jsonpath.Parse(sf.name, "{"+path+"}")
	if err != nil {
		return sf
	}
	if sf.steps = fieldSteps(tree); sf.steps != nil {
		return sf
	}
	sf.path = jsonpath.New(sf.name).AllowMissingKeys(true)
	if err := sf.path.Parse("{" + path + "}"); err != nil {
		sf.path = nil
	}
	return sf
}

// fieldSteps is a parsed JSONPath as map keys, nil unless it is made of field names only.
func fieldSteps(tree *jsonpath.Parser) []string {
	if len(tree.Root.Nodes) != 1 {
		return nil
	}
	list, ok := tree.Root.Nodes[0].(*jsonpath.ListNode)
	if !ok || len(list.Nodes) == 0 {
		return nil
	}
	steps := make([]string, 0, len(list.Nodes))
	for _, n := range list.Nodes {
		f, ok := n.(*jsonpath.FieldNode)
		if !ok || f.Value == "" {
			return nil
		}
		steps = append(steps, f.Value)
	}
	return steps
}

// value is the field's value in content: fmt.Sprint of what the path finds, "" if it
// finds nothing or null (upstream's formatting).
func (sf *selectableField) value(content map[string]any) string {
	var v any
	switch {
	case content == nil:
	case sf.steps != nil:
		v = content
		for _, s := range sf.steps {
			m, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v = m[s]
		}
	case sf.path != nil:
		sf.mu.Lock()
		results, err := sf.path.FindResults(content)
		sf.mu.Unlock()
		// Several results: upstream fails the object; no value here.
		if err != nil || len(results) != 1 || len(results[0]) != 1 {
			return ""
		}
		v = results[0][0].Interface()
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}
