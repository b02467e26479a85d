package rest

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kubeos.dev/kube/internal/registry"
)

// protobufType is Kubernetes' protobuf media type.
const protobufType = "application/vnd.kubernetes.protobuf"

// protoMagic starts every protobuf-encoded Kubernetes object.
var protoMagic = []byte{'k', '8', 's', 0}

type protoMarshaler interface{ Marshal() ([]byte, error) }

// protoMemo remembers the protobuf encoding of objects by identity and resourceVersion, so
// that objects listed again and again from the watch cache are converted once. It is bounded:
// when full it starts afresh.
type protoMemo struct {
	mu  sync.Mutex
	m   map[string][]byte
	max int
}

func (pm *protoMemo) get(k string) ([]byte, bool) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	b, ok := pm.m[k]
	return b, ok
}

func (pm *protoMemo) put(k string, b []byte) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.m == nil || len(pm.m) >= pm.max {
		pm.m = make(map[string][]byte, 1024)
	}
	pm.m[k] = b
}

var objectProtos = &protoMemo{max: 50000}

// protoObject is the protobuf message of one built-in object (without the envelope).
func protoObject(kind *registry.Kind, obj *unstructured.Unstructured) ([]byte, error) {
	rv := obj.GetResourceVersion()
	memoKey := ""
	if rv != "" {
		memoKey = kind.APIVersion() + "/" + kind.Kind + "/" + obj.GetNamespace() + "/" + obj.GetName() + "/" + rv
		if b, ok := objectProtos.get(memoKey); ok {
			return b, nil
		}
	}
	typed := kind.NewTyped()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, fmt.Errorf("convert %s %s to protobuf: %w", kind.Kind, obj.GetName(), err)
	}
	m, ok := typed.(protoMarshaler)
	if !ok {
		return nil, fmt.Errorf("%T has no protobuf encoding", typed)
	}
	b, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if memoKey != "" {
		objectProtos.put(memoKey, b)
	}
	return b, nil
}

// envelope wraps a protobuf message in the runtime.Unknown envelope with the magic prefix.
func envelope(apiVersion, kind string, raw []byte) ([]byte, error) {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		return nil, err
	}
	return append(append(make([]byte, 0, len(b)+4), protoMagic...), b...), nil
}

// writeProto writes an object as protobuf.
func (c *call) writeProto(code int, obj *unstructured.Unstructured) {
	raw, err := protoObject(c.kind, obj)
	if err == nil {
		var body []byte
		if body, err = envelope(c.kind.APIVersion(), c.kind.Kind, raw); err == nil {
			writeBody(c.w, code, protobufType, body)
			return
		}
	}
	c.h.log.Error("protobuf encoding failed; answering JSON", "err", err)
	writeJSON(c.w, code, obj.Object)
}

// writeProtoList writes a list as protobuf: every Kubernetes list message is ListMeta in
// field 1 and the items in field 2, so the items' memoised encodings are spliced in.
func (c *call) writeProtoList(lm metav1.ListMeta, items []*unstructured.Unstructured) {
	meta, err := lm.Marshal()
	if err != nil {
		c.fail(err)
		return
	}
	buf := protowire.AppendTag(nil, 1, protowire.BytesType)
	buf = protowire.AppendBytes(buf, meta)
	for _, it := range items {
		raw, err := protoObject(c.kind, it)
		if err != nil {
			c.h.log.Error("protobuf encoding failed; answering JSON", "err", err)
			c.writeList(lm, items)
			return
		}
		buf = protowire.AppendTag(buf, 2, protowire.BytesType)
		buf = protowire.AppendBytes(buf, raw)
	}
	body, err := envelope(c.kind.APIVersion(), c.kind.ListKind, buf)
	if err != nil {
		c.fail(err)
		return
	}
	writeBody(c.w, http.StatusOK, protobufType, body)
}

func writeBody(w http.ResponseWriter, code int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}
