package registry

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
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
	if errs := checkTypes(obj.Object["metadata"], objectMetaType, fld); len(errs) > 0 {
		return errs
	}
	return validateObjectMetaUpdate(obj, old, namespaced, nameFn, fld)
}

// validateObjectMetaUpdate is ValidateObjectMetaUpdate for an object whose metadata types
// were checked already (a typed strategy checks the whole object before).
func validateObjectMetaUpdate(obj, old *unstructured.Unstructured, namespaced bool, nameFn NameFunc, fld *field.Path) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaAccessor(obj, namespaced, nameFn, fld)
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
//
// It runs on every write of a built-in kind, so the per-type work (walking struct fields and
// their tags) is done once per type (typeCheckOf) and paths are built only for errors.
func checkTypes(v any, t reflect.Type, fld *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	c := typeChecker{root: fld}
	c.check(v, typeCheckOf(t))
	return c.errs
}

// CheckTypes is checkTypes for other packages: the mismatches between an unstructured value
// and the Go type it must decode into, each at its path.
func CheckTypes(v any, t reflect.Type, fld *field.Path) field.ErrorList { return checkTypes(v, t, fld) }

// checkKind is what a typeCheck expects of a value.
type checkKind uint8

const (
	checkAny         checkKind = iota // anything (RawExtension, interfaces, unknown kinds)
	checkTime                         // metav1.Time, metav1.MicroTime
	checkIntOrString                  // intstr.IntOrString
	checkQuantity                     // resource.Quantity
	checkTypedString                  // a self-describing type whose first OpenAPI type is string
	checkStruct
	checkBytes // []byte, base64 in JSON
	checkSlice
	checkMap
	checkString
	checkBool
	checkInt
	checkInt32
	checkFloat
)

// typeCheck is what checkTypes needs to know of a Go type, computed once per type.
type typeCheck struct {
	kind   checkKind
	fields []fieldCheck // checkStruct: its JSON fields in declaration order
	elem   *typeCheck   // checkSlice, checkMap
}

type fieldCheck struct {
	name string
	c    *typeCheck
}

var (
	typeChecks   sync.Map // reflect.Type -> *typeCheck
	typeChecksMu sync.Mutex
)

// typeCheckOf returns the typeCheck of t, building it (and those of the types it contains)
// on first use.
func typeCheckOf(t reflect.Type) *typeCheck {
	if tc, ok := typeChecks.Load(t); ok {
		return tc.(*typeCheck)
	}
	typeChecksMu.Lock()
	defer typeChecksMu.Unlock()
	building := map[reflect.Type]*typeCheck{}
	tc := buildTypeCheck(t, building)
	for bt, btc := range building {
		typeChecks.LoadOrStore(bt, btc)
	}
	return tc
}

func buildTypeCheck(t reflect.Type, building map[reflect.Type]*typeCheck) *typeCheck {
	if tc, ok := typeChecks.Load(t); ok {
		return tc.(*typeCheck)
	}
	if tc, ok := building[t]; ok {
		return tc // a recursive type: filled in by the caller that started it
	}
	tc := &typeCheck{}
	building[t] = tc
	et := t
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
	}
	switch et {
	case rawExtension:
		return tc
	case reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]():
		tc.kind = checkTime
		return tc
	case reflect.TypeFor[intstr.IntOrString]():
		tc.kind = checkIntOrString
		return tc
	case reflect.TypeFor[resource.Quantity]():
		tc.kind = checkQuantity
		return tc
	}
	if o, ok := reflect.Zero(et).Interface().(openAPITyper); ok && et.Kind() == reflect.Struct {
		// Other self-describing types (apiextensions JSON, JSONSchemaPropsOr*) accept any
		// JSON value of their declared types.
		if types := o.OpenAPISchemaType(); len(types) > 0 && types[0] == "string" {
			tc.kind = checkTypedString
		}
		return tc
	}
	switch et.Kind() {
	case reflect.Struct:
		tc.kind = checkStruct
		forEachJSONField(et, func(name string, ft reflect.Type) {
			tc.fields = append(tc.fields, fieldCheck{name: name, c: buildTypeCheck(ft, building)})
		})
	case reflect.Slice, reflect.Array:
		if et.Elem().Kind() == reflect.Uint8 {
			tc.kind = checkBytes
		} else {
			tc.kind, tc.elem = checkSlice, buildTypeCheck(et.Elem(), building)
		}
	case reflect.Map:
		tc.kind, tc.elem = checkMap, buildTypeCheck(et.Elem(), building)
	case reflect.String:
		tc.kind = checkString
	case reflect.Bool:
		tc.kind = checkBool
	case reflect.Int32:
		tc.kind = checkInt32
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		tc.kind = checkInt
	case reflect.Float32, reflect.Float64:
		tc.kind = checkFloat
	}
	return tc
}

// pathElem is one step below the root: a field name, a list index or a map key.
type pathElem struct {
	name  string
	index int
	step  uint8 // stepChild, stepIndex, stepKey
}

const (
	stepChild uint8 = iota
	stepIndex
	stepKey
)

// typeChecker walks one value. The path to the value being checked is kept as a stack of
// steps, in an array that lives on the caller's stack for all but very deep values, and is
// turned into a *field.Path only when there is an error to report.
type typeChecker struct {
	root  *field.Path
	errs  field.ErrorList
	steps [24]pathElem
	deep  []pathElem // steps beyond len(steps)
	depth int
}

func (c *typeChecker) push(e pathElem) {
	if c.depth < len(c.steps) {
		c.steps[c.depth] = e
	} else {
		c.deep = append(c.deep[:c.depth-len(c.steps)], e)
	}
	c.depth++
}

func (c *typeChecker) pop() { c.depth-- }

// path is the *field.Path of the value being checked, as the recursive checkTypes built it:
// a field below a nil root starts a path of its own, an index or key below a nil root hangs
// from an empty path.
func (c *typeChecker) path() *field.Path {
	p := c.root
	for i := range c.depth {
		var e pathElem
		if i < len(c.steps) {
			e = c.steps[i]
		} else {
			e = c.deep[i-len(c.steps)]
		}
		switch e.step {
		case stepChild:
			p = child(p, e.name)
		case stepIndex:
			if p == nil {
				p = field.NewPath("")
			}
			p = p.Index(e.index)
		case stepKey:
			if p == nil {
				p = field.NewPath("")
			}
			p = p.Key(e.name)
		}
	}
	return p
}

func (c *typeChecker) fail(e *field.Error) { c.errs = append(c.errs, e) }

func (c *typeChecker) check(v any, tc *typeCheck) {
	if v == nil {
		return
	}
	switch tc.kind {
	case checkTime:
		s, ok := v.(string)
		if !ok {
			c.fail(field.TypeInvalid(c.path(), v, "must be a string (RFC 3339 date-time)"))
			return
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil && s != "" {
			c.fail(field.Invalid(c.path(), s, "must be an RFC 3339 date-time"))
		}
	case checkIntOrString:
		if _, ok := v.(string); ok || isInteger(v) {
			return
		}
		c.fail(field.TypeInvalid(c.path(), v, "must be an integer or a string"))
	case checkQuantity:
		switch x := v.(type) {
		case string:
			if _, err := resource.ParseQuantity(x); err != nil {
				c.fail(field.Invalid(c.path(), x, err.Error()))
			}
			return
		default:
			if isNumber(v) {
				return
			}
		}
		c.fail(field.TypeInvalid(c.path(), v, "must be a quantity (string or number)"))
	case checkTypedString:
		if _, ok := v.(string); !ok {
			c.fail(field.TypeInvalid(c.path(), v, "must be a string"))
		}
	case checkStruct:
		m, ok := v.(map[string]any)
		if !ok {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be an object"))
			return
		}
		for i := range tc.fields {
			f := &tc.fields[i]
			if fv, ok := m[f.name]; ok && fv != nil && f.c.kind != checkAny {
				c.push(pathElem{name: f.name, step: stepChild})
				c.check(fv, f.c)
				c.pop()
			}
		}
	case checkBytes:
		s, ok := v.(string)
		if !ok {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be a base64-encoded string"))
			return
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			c.fail(field.Invalid(c.path(), "<value redacted>", "must be base64-encoded: "+err.Error()))
		}
	case checkSlice:
		l, ok := v.([]any)
		if !ok {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be an array"))
			return
		}
		if tc.elem.kind == checkAny {
			return
		}
		for i, e := range l {
			c.push(pathElem{index: i, step: stepIndex})
			c.check(e, tc.elem)
			c.pop()
		}
	case checkMap:
		m, ok := v.(map[string]any)
		if !ok {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be an object"))
			return
		}
		if tc.elem.kind == checkAny {
			return
		}
		for k, e := range m {
			c.push(pathElem{name: k, step: stepKey})
			c.check(e, tc.elem)
			c.pop()
		}
	case checkString:
		if _, ok := v.(string); !ok {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be a string"))
		}
	case checkBool:
		if _, ok := v.(bool); !ok {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be a boolean"))
		}
	case checkInt, checkInt32:
		if !isInteger(v) {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be an integer"))
			return
		}
		if tc.kind == checkInt32 {
			if n, _ := toFloat(v); n > math.MaxInt32 || n < math.MinInt32 {
				c.fail(field.Invalid(c.path(), v, "must fit in a 32-bit integer"))
			}
		}
	case checkFloat:
		if !isNumber(v) {
			c.fail(field.TypeInvalid(c.path(), shortValue(v), "must be a number"))
		}
	}
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
	// oldMatters, when set, says whether validateUpdate can find anything wrong given the
	// stored object; when it reports false the stored object is not decoded for it (an
	// update of a configmap that is not immutable: the common case, every update).
	oldMatters func(old *unstructured.Unstructured) bool
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
	_, errs := s.ValidateTyped(obj)
	return errs
}

func (s *typedStrategy[T]) ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	_, errs := s.ValidateUpdateTyped(obj, old)
	return errs
}

var _ TypedValidator = (*typedStrategy[runtime.Object])(nil)

func (s *typedStrategy[T]) ValidateTyped(obj *unstructured.Unstructured) (runtime.Object, field.ErrorList) {
	typed := s.newObj()
	if errs := decode(obj, typed); len(errs) > 0 {
		return nil, errs
	}
	// decode checked the types of the whole object, metadata included.
	errs := apivalidation.ValidateObjectMetaAccessor(obj, s.namespaced, s.name, field.NewPath("metadata"))
	if s.validate != nil {
		errs = append(errs, s.validate(typed)...)
	}
	return typed, errs
}

func (s *typedStrategy[T]) ValidateUpdateTyped(obj, old *unstructured.Unstructured) (runtime.Object, field.ErrorList) {
	typed := s.newObj()
	if errs := decode(obj, typed); len(errs) > 0 {
		return nil, errs
	}
	errs := validateObjectMetaUpdate(obj, old, s.namespaced, s.name, field.NewPath("metadata"))
	if s.validate != nil {
		errs = append(errs, s.validate(typed)...)
	}
	if s.validateUpdate != nil && (s.oldMatters == nil || s.oldMatters(old)) {
		typedOld := s.newObj()
		if len(decode(old, typedOld)) == 0 {
			errs = append(errs, s.validateUpdate(typed, typedOld)...)
		}
	}
	return typed, errs
}

// Name rules of the built-in kinds.
var (
	nameDNSSubdomain NameFunc = apivalidation.NameIsDNSSubdomain
	nameDNSLabel     NameFunc = apivalidation.NameIsDNSLabel
)
