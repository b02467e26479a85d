package storage

import (
	"encoding/json"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// encode returns the stored form of obj: its JSON without metadata.resourceVersion, which
// etcd's mod revision stands for.
func encode(key string, obj *unstructured.Unstructured) ([]byte, error) {
	if obj == nil || obj.Object == nil {
		return nil, errorf(ErrInvalidObject, key, "no object")
	}
	md, _ := obj.Object["metadata"].(map[string]any)
	var rv any
	hadRV := false
	if md != nil {
		rv, hadRV = md["resourceVersion"]
		delete(md, "resourceVersion")
	}
	data, err := json.Marshal(obj.Object)
	if hadRV {
		md["resourceVersion"] = rv
	}
	if err != nil {
		return nil, errorf(ErrInvalidObject, key, "%v", err)
	}
	if len(data) > MaxValueSize {
		return nil, errorf(ErrTooLarge, key, "%d bytes encoded, the limit is %d", len(data), MaxValueSize)
	}
	return data, nil
}

// decode turns a stored value back into an object whose resourceVersion is rev.
func decode(key string, data []byte, rev int64) (*unstructured.Unstructured, error) {
	m := map[string]any{}
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, errorf(ErrInvalidObject, key, "stored value does not decode: %v", err)
	}
	obj := &unstructured.Unstructured{Object: m}
	setRevision(obj, rev)
	return obj, nil
}

func setRevision(obj *unstructured.Unstructured, rev int64) {
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
}

// Revision parses an object's resourceVersion; 0 when it has none.
func Revision(obj *unstructured.Unstructured) (int64, error) {
	rv := obj.GetResourceVersion()
	if rv == "" {
		return 0, nil
	}
	return ParseRevision(rv)
}

// ParseRevision parses a resourceVersion string as an etcd revision.
func ParseRevision(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, errorf(ErrInvalidRevision, "", "%q", rv)
	}
	return n, nil
}
