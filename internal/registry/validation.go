package registry

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NameFunc validates an object name (prefix: the name is a generateName prefix) and returns
// the problems found. apimachinery's NameIsDNSSubdomain, NameIsDNSLabel and
// path.ValidatePathSegmentName have this shape.
type NameFunc = func(name string, prefix bool) []string

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

// ValidateObjectMeta checks the metadata every object shares: the types of its fields, name
// or generateName (by nameFn), namespace present iff namespaced, labels, annotations (256 KiB
// in total), ownerReferences, finalizers and managedFields. fld is the path of the metadata,
// normally field.NewPath("metadata").
func ValidateObjectMeta(obj *unstructured.Unstructured, namespaced bool, nameFn NameFunc, fld *field.Path) field.ErrorList {
	if errs := checkTypes(obj.Object["metadata"], objectMetaType, fld); len(errs) > 0 {
		return errs
	}
	return apivalidation.ValidateObjectMetaAccessor(obj, namespaced, nameFn, fld)
}

// ValidateObjectMetaUpdate checks an update of the metadata: what ValidateObjectMeta checks
// on the new object, plus resourceVersion present, generation not decremented, name,
// namespace, uid, creationTimestamp and deletion fields unchanged, no new finalizers once
// deleting. The caller sets resourceVersion (from the stored object for an unconditional
// update), uid and creationTimestamp before calling it, as kube-apiserver does.
func ValidateObjectMetaUpdate(obj, old *unstructured.Unstructured, namespaced bool, nameFn NameFunc, fld *field.Path) field.ErrorList {
	errs := ValidateObjectMeta(obj, namespaced, nameFn, fld)
	if len(errs) > 0 {
		return errs
	}
	if len(checkTypes(old.Object["metadata"], objectMetaType, fld)) > 0 {
		return nil // the stored object is beyond repair; let the new one replace it
	}
	for _, e := range apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, fld) {
		// labels, annotations and ownerReferences are checked by ValidateObjectMeta already.
		if p := e.Field; strings.HasPrefix(p, fld.Child("labels").String()) ||
			strings.HasPrefix(p, fld.Child("annotations").String()) ||
			strings.HasPrefix(p, fld.Child("ownerReferences").String()) ||
			strings.HasPrefix(p, fld.Child("managedFields").String()) {
			continue
		}
		errs = append(errs, e)
	}
	return errs
}

// child is parent.Child(name), with a nil parent standing for the object's root.
func child(parent *field.Path, name string) *field.Path {
	if parent == nil {
		return field.NewPath(name)
	}
	return parent.Child(name)
}

func pathString(p *field.Path) string {
	if p == nil {
		return "<root>"
	}
	return p.String()
}

// checkTypes compares an unstructured value with the Go type it must decode into and
// reports each mismatch at its path, so that bad input becomes a 422 with causes rather
// than a conversion error. Unknown fields are not its concern; nil is accepted anywhere.
func checkTypes(v any, t reflect.Type, fld *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case rawExtension:
		return nil
	case reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]():
		s, ok := v.(string)
		if !ok {
			return field.ErrorList{field.TypeInvalid(fld, v, "must be a string (RFC 3339 date-time)")}
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil && s != "" {
			return field.ErrorList{field.Invalid(fld, s, "must be an RFC 3339 date-time")}
		}
		return nil
	case reflect.TypeFor[intstr.IntOrString]():
		switch v.(type) {
		case string:
			return nil
		default:
			if isInteger(v) {
				return nil
			}
		}
		return field.ErrorList{field.TypeInvalid(fld, v, "must be an integer or a string")}
	case reflect.TypeFor[resource.Quantity]():
		switch x := v.(type) {
		case string:
			if _, err := resource.ParseQuantity(x); err != nil {
				return field.ErrorList{field.Invalid(fld, x, err.Error())}
			}
			return nil
		default:
			if isNumber(v) {
				return nil
			}
		}
		return field.ErrorList{field.TypeInvalid(fld, v, "must be a quantity (string or number)")}
	}
	if o, ok := reflect.Zero(t).Interface().(openAPITyper); ok && t.Kind() == reflect.Struct {
		// Other self-describing types (apiextensions JSON, JSONSchemaPropsOr*) accept any
		// JSON value of their declared types.
		types := o.OpenAPISchemaType()
		if len(types) == 0 {
			return nil
		}
		if types[0] == "string" {
			if _, ok := v.(string); !ok {
				return field.ErrorList{field.TypeInvalid(fld, v, "must be a string")}
			}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be an object")}
		}
		var errs field.ErrorList
		forEachJSONField(t, func(name string, ft reflect.Type) {
			if fv, ok := m[name]; ok {
				errs = append(errs, checkTypes(fv, ft, child(fld, name))...)
			}
		})
		return errs
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := v.(string)
			if !ok {
				return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be a base64-encoded string")}
			}
			if _, err := base64.StdEncoding.DecodeString(s); err != nil {
				return field.ErrorList{field.Invalid(fld, "<value redacted>", "must be base64-encoded: "+err.Error())}
			}
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be an array")}
		}
		var errs field.ErrorList
		for i, e := range l {
			p := fld
			if p == nil {
				p = field.NewPath("")
			}
			errs = append(errs, checkTypes(e, t.Elem(), p.Index(i))...)
		}
		return errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be an object")}
		}
		var errs field.ErrorList
		for k, e := range m {
			p := fld
			if p == nil {
				p = field.NewPath("")
			}
			errs = append(errs, checkTypes(e, t.Elem(), p.Key(k))...)
		}
		return errs
	case reflect.String:
		if _, ok := v.(string); !ok {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be a string")}
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be a boolean")}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !isInteger(v) {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be an integer")}
		}
		if t.Kind() == reflect.Int32 {
			if n, _ := toFloat(v); n > math.MaxInt32 || n < math.MinInt32 {
				return field.ErrorList{field.Invalid(fld, v, "must fit in a 32-bit integer")}
			}
		}
	case reflect.Float32, reflect.Float64:
		if !isNumber(v) {
			return field.ErrorList{field.TypeInvalid(fld, shortValue(v), "must be a number")}
		}
	}
	return nil
}

// shortValue keeps error messages small: composite values are described, not echoed.
func shortValue(v any) any {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return v
}

func toFloat(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

func isNumber(v any) bool { _, ok := toFloat(v); return ok }

func isInteger(v any) bool {
	f, ok := toFloat(v)
	return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// forEachJSONField calls fn for each json field of struct type t, following inlined and
// embedded structs.
func forEachJSONField(t reflect.Type, fn func(name string, ft reflect.Type)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && (strings.Contains(","+opts+",", ",inline,") || !hasTag || name == "") {
			if et := indirectType(f.Type); et.Kind() == reflect.Struct {
				forEachJSONField(et, fn)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fn(name, f.Type)
	}
}

// decode converts obj into the typed object into after checking its field types.
func decode(obj *unstructured.Unstructured, into runtime.Object) field.ErrorList {
	if errs := checkTypes(obj.Object, reflect.TypeOf(into), nil); len(errs) > 0 {
		return errs
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, fmt.Sprintf("cannot decode %T: %v", into, err))}
	}
	return nil
}

// typedStrategy is the strategy of a built-in kind: metadata is validated by
// ValidateObjectMeta with the kind's name rule, then the object is decoded into its Go type
// for the kind's own checks.
type typedStrategy[T runtime.Object] struct {
	namespaced bool
	name       NameFunc
	newObj     func() T
	// prepareCreate and prepareUpdate adjust the unstructured object (defaults,
	// server-owned fields); optional.
	prepareCreate func(obj *unstructured.Unstructured)
	prepareUpdate func(obj, old *unstructured.Unstructured)
	// validate and validateUpdate check the decoded object; optional. validateUpdate runs
	// in addition to validate.
	validate       func(obj T) field.ErrorList
	validateUpdate func(obj, old T) field.ErrorList
}

var _ Strategy = (*typedStrategy[runtime.Object])(nil)

func (s *typedStrategy[T]) PrepareForCreate(obj *unstructured.Unstructured) {
	if s.prepareCreate != nil {
		s.prepareCreate(obj)
	}
}

func (s *typedStrategy[T]) PrepareForUpdate(obj, old *unstructured.Unstructured) {
	if s.prepareUpdate != nil {
		s.prepareUpdate(obj, old)
	}
}

func (s *typedStrategy[T]) Validate(obj *unstructured.Unstructured) field.ErrorList {
	typed := s.newObj()
	if errs := decode(obj, typed); len(errs) > 0 {
		return errs
	}
	errs := ValidateObjectMeta(obj, s.namespaced, s.name, field.NewPath("metadata"))
	if s.validate != nil {
		errs = append(errs, s.validate(typed)...)
	}
	return errs
}

func (s *typedStrategy[T]) ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	typed := s.newObj()
	if errs := decode(obj, typed); len(errs) > 0 {
		return errs
	}
	errs := ValidateObjectMetaUpdate(obj, old, s.namespaced, s.name, field.NewPath("metadata"))
	if s.validate != nil {
		errs = append(errs, s.validate(typed)...)
	}
	if s.validateUpdate != nil {
		typedOld := s.newObj()
		if len(decode(old, typedOld)) == 0 {
			errs = append(errs, s.validateUpdate(typed, typedOld)...)
		}
	}
	return errs
}

// Name rules of the built-in kinds.
var (
	nameDNSSubdomain NameFunc = apivalidation.NameIsDNSSubdomain
	nameDNSLabel     NameFunc = apivalidation.NameIsDNSLabel
)
