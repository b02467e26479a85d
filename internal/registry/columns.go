package registry

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Table cells are computed from the unstructured object without decoding it: a Table of a
// long list must stay cheap, and a malformed stored object must still print (empty cells,
// never a panic).

var objectMetaDocs = metav1.ObjectMeta{}.SwaggerDoc()

// NameColumn is the Name column every Table starts with, as kube-apiserver prints it.
func NameColumn() Column {
	return Column{Name: "Name", Type: "string", Format: "name", Description: objectMetaDocs["name"],
		Cell: func(obj *unstructured.Unstructured) any { return obj.GetName() }}
}

// AgeColumn is the Age column: the time since creation, e.g. "3d4h".
func AgeColumn() Column {
	return Column{Name: "Age", Type: "string", Description: objectMetaDocs["creationTimestamp"],
		CellAt: func(obj *unstructured.Unstructured, now time.Time) any {
			return Since(obj.GetCreationTimestamp().Time, now)
		}}
}

// createdAtColumn is the "Created At" column of kube-apiserver's default Table (and of
// roles): the creation time in RFC 3339, UTC.
func createdAtColumn() Column {
	return Column{Name: "Created At", Type: "date", Description: objectMetaDocs["creationTimestamp"],
		Cell: func(obj *unstructured.Unstructured) any {
			return obj.GetCreationTimestamp().UTC().Format(time.RFC3339)
		}}
}

// Since renders the time from t to now as kubectl's printers do ("<unknown>" for a zero
// time).
func Since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// str is the string at path, or "" if absent or not a string.
func str(obj *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, path...)
	return s
}

// count is the number of entries of the map or list at path.
func count(obj *unstructured.Unstructured, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	switch x := v.(type) {
	case map[string]any:
		return int64(len(x))
	case []any:
		return int64(len(x))
	}
	return 0
}

// integer is the integer at path (JSON numbers decode as int64 or float64).
func integer(obj *unstructured.Unstructured, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if f, ok := toFloat(v); ok {
		return int64(f)
	}
	return 0
}

// timestamp is the RFC 3339 time at path, zero if absent or malformed.
func timestamp(obj *unstructured.Unstructured, path ...string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, str(obj, path...))
	if err != nil {
		return time.Time{}
	}
	return t
}
