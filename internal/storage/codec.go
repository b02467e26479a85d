package storage

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"kubeos.dev/kube/internal/jsonenc"
)

// encode returns the stored form of obj: its JSON without metadata.resourceVersion, which
// etcd's mod revision stands for. It never changes obj, which may be shared (an object from a
// cache passed as UpdateOptions.Current is read concurrently by other goroutines).
func encode(key string, obj *unstructured.Unstructured) ([]byte, error) {
	if obj == nil || obj.Object == nil {
		return nil, errorf(ErrInvalidObject, key, "no object")
	}
	v := obj.Object
	if md, ok := v["metadata"].(map[string]any); ok {
		if _, has := md["resourceVersion"]; has {
			// Shallow copies of the two maps on the path: cheap, and obj stays untouched.
			md2 := make(map[string]any, len(md))
			for k, x := range md {
				if k != "resourceVersion" {
					md2[k] = x
				}
			}
			v2 := make(map[string]any, len(v))
			for k, x := range v {
				v2[k] = x
			}
			v2["metadata"] = md2
			v = v2
		}
	}
	// Without reflection, as encoding/json writes it minus its HTML escaping: the stored
	// form of every write, and decoded the same by any JSON reader.
	data, err := jsonenc.AppendValue(make([]byte, 0, 1024), v)
	if err != nil {
		return nil, errorf(ErrInvalidObject, key, "%v", err)
	}
	if len(data) > MaxValueSize {
		return nil, errorf(ErrTooLarge, key, "%d bytes encoded, the limit is %d", len(data), MaxValueSize)
	}
	return data, nil
}

// Transformer changes values on their way to and from etcd: encryption at rest. The key is
// the object's etcd key (authenticated data for AEAD ciphers, and how a transformer knows the
// resource). It must be safe for concurrent use.
type Transformer interface {
	// TransformToStorage seals a plain value for key.
	TransformToStorage(ctx context.Context, key string, plain []byte) ([]byte, error)
	// TransformFromStorage opens a stored value. stale reports that the value was not written
	// with the current writing provider and should be rewritten (key rotation).
	TransformFromStorage(key string, stored []byte) (plain []byte, stale bool, err error)
}

// seal applies the store's transformer to a plain value.
func (s *Store) seal(ctx context.Context, key string, plain []byte) ([]byte, error) {
	if s.transformer == nil {
		return plain, nil
	}
	out, err := s.transformer.TransformToStorage(ctx, key, plain)
	if err != nil {
		return nil, errorf(ErrInvalidObject, key, "encrypting: %v", err)
	}
	return out, nil
}

// decode opens a stored value and turns it into an object whose resourceVersion is rev. It
// also returns the plain value and whether the value is stale (see Transformer).
func (s *Store) decode(key string, data []byte, rev int64) (*unstructured.Unstructured, []byte, bool, error) {
	stale := false
	if s.transformer != nil {
		plain, st, err := s.transformer.TransformFromStorage(key, data)
		if err != nil {
			return nil, nil, false, errorf(ErrInvalidObject, key, "decrypting: %v", err)
		}
		data, stale = plain, st
	}
	obj, err := decode(key, data, rev)
	return obj, data, stale, err
}

// decode turns a plain stored value back into an object whose resourceVersion is rev.
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
