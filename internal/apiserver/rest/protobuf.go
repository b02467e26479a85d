package rest

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

// protobufType is Kubernetes' protobuf media type.
const protobufType = "application/vnd.kubernetes.protobuf"

// protoMagic starts every protobuf-encoded Kubernetes object.
var protoMagic = []byte{'k', '8', 's', 0}

type protoMarshaler interface{ Marshal() ([]byte, error) }

// protoMemo remembers the protobuf encoding of objects by identity and resourceVersion, so
// that objects listed again and again from the watch cache are converted once. One name at
// one resourceVersion is one content. It is bounded: when full it starts afresh.
type protoMemo struct {
	mu  sync.Mutex
	m   map[memoKey][]byte
	max int
}

// memoKey names one encoding: of the object at namespace/name and resourceVersion, as the
// kind's full message or its PartialObjectMetadata. A struct, so that a lookup builds no
// string (500 of them per list of 500).
type memoKey struct {
	kind                *registry.Kind
	partial             bool
	namespace, name, rv string
}

func (pm *protoMemo) get(k memoKey) ([]byte, bool) {
	pm.mu.Lock()
	b, ok := pm.m[k]
	pm.mu.Unlock()
	return b, ok
}

func (pm *protoMemo) put(k memoKey, b []byte) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.m == nil || len(pm.m) >= pm.max {
		pm.m = make(map[memoKey][]byte, 1024)
	}
	pm.m[k] = b
}

var objectProtos = &protoMemo{max: 50000}

// writtenProtos remembers, briefly, the encodings that writes of packed kinds (pods) answered
// with: those kinds' objects are not remembered in objectProtos (see memoProto), but the
// watch events of a write follow it within milliseconds and are encoded from its answer.
// Small, so that it holds no more than the last few thousand writes.
var writtenProtos = &protoMemo{max: 4096}

// protoObject is the protobuf message of one built-in object (without the envelope),
// remembered in objectProtos when memo is set.
func protoObject(kind *registry.Kind, obj *unstructured.Unstructured, memo bool) ([]byte, error) {
	k, ok := objectMemoKey(kind, obj, false)
	if !ok {
		return protoMessage(kind, obj)
	}
	if !memo {
		if b, ok := writtenProtos.get(k); ok {
			return b, nil
		}
		return protoMessage(kind, obj)
	}
	if b, ok := objectProtos.get(k); ok {
		return b, nil
	}
	b, err := protoMessage(kind, obj)
	if err != nil {
		return nil, err
	}
	objectProtos.put(k, b)
	return b, nil
}

// objectMemoKey is obj's key in objectProtos; false for an object without resourceVersion.
func objectMemoKey(kind *registry.Kind, obj *unstructured.Unstructured, partial bool) (memoKey, bool) {
	md, _ := obj.Object["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	if rv == "" {
		return memoKey{}, false
	}
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return memoKey{kind: kind, partial: partial, namespace: ns, name: name, rv: rv}, true
}

// memoProto says whether the protobuf encodings of this call's objects are remembered: not
// for objects whose watch cache is packed to save memory (CRDs), which a memo would undo.
func (c *call) memoProto() bool {
	return c.h.caches == nil || !c.h.caches.Packed(c.kind.Prefix())
}

// protoMessage converts obj to its Go type and encodes it.
func protoMessage(kind *registry.Kind, obj *unstructured.Unstructured) ([]byte, error) {
	typed := kind.NewTyped()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, fmt.Errorf("convert %s %s to protobuf: %w", kind.Kind, obj.GetName(), err)
	}
	m, ok := typed.(protoMarshaler)
	if !ok {
		return nil, fmt.Errorf("%T has no protobuf encoding", typed)
	}
	return m.Marshal()
}

// validatedProto is the protobuf message of obj, the object this call wrote, encoded from
// the typed object its validation converted obj's content from (registry.Validated), which
// saves converting the content again. The store set the resourceVersion on the content
// after validation, in place (storage.Store.Create, GuaranteedUpdate); nothing else changes
// it. nil when the call has no such object for obj.
func (c *call) validatedProto(obj *unstructured.Unstructured) ([]byte, error) {
	v := c.validated
	if !v.For(obj.Object) || v.Versioned == nil {
		return nil, nil
	}
	typed, ok := v.Versioned.(interface {
		protoMarshaler
		metav1.Object
	})
	if !ok || c.kind.NewTyped == nil || reflect.TypeOf(typed) != c.typedType() {
		return nil, nil
	}
	typed.SetResourceVersion(obj.GetResourceVersion())
	b, err := typed.Marshal()
	if err != nil {
		return nil, err
	}
	if k, ok := objectMemoKey(c.kind, obj, false); ok {
		if c.memoProto() {
			objectProtos.put(k, b)
		} else {
			writtenProtos.put(k, b)
		}
	}
	return b, nil
}

// typedType is the Go type of the kind's typed objects, found once per Kind.
func (c *call) typedType() reflect.Type {
	return c.kind.Derived(typedTypeKey{}, func() any { return reflect.TypeOf(c.kind.NewTyped()) }).(reflect.Type)
}

type typedTypeKey struct{}

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
	raw, err := c.validatedProto(obj)
	if raw == nil && err == nil {
		raw, err = protoObject(c.kind, obj, c.memoProto())
	}
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

// writeProtoList writes a list as protobuf, the items' memoised encodings spliced in.
func (c *call) writeProtoList(lm metav1.ListMeta, items []*unstructured.Unstructured) {
	memo := c.memoProto()
	err := streamProtoList(c.w, c.kind.APIVersion(), c.kind.ListKind, lm, items, func(it *unstructured.Unstructured) ([]byte, error) { return protoObject(c.kind, it, memo) })
	if err != nil {
		c.h.log.Error("protobuf encoding failed; answering JSON", "err", err)
		c.writeList(lm, items)
	}
}

// streamProtoList writes the enveloped list message of items without building it whole:
// every item is encoded (or found in a memo) first, so that the lengths are known, then the
// envelope, ListMeta and the items go out through one pooled buffer. The bytes are exactly
// those of envelope(apiVersion, kind, <the list message>). An error comes before anything is written.
func streamProtoList(w http.ResponseWriter, apiVersion, kind string, lm metav1.ListMeta, items []*unstructured.Unstructured, item func(*unstructured.Unstructured) ([]byte, error)) error {
	meta, err := lm.Marshal()
	if err != nil {
		return err
	}
	raws := make([][]byte, len(items))
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(meta))
	for i, it := range items {
		if raws[i], err = item(it); err != nil {
			return err
		}
		size += protowire.SizeTag(2) + protowire.SizeBytes(len(raws[i]))
	}
	tm, err := (&runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}).Marshal()
	if err != nil {
		return err
	}
	bp := listBuffers.Get().(*[]byte)
	defer listBuffers.Put(bp)
	buf := append((*bp)[:0], protoMagic...)
	buf = protowire.AppendTag(buf, 1, protowire.BytesType)
	buf = protowire.AppendBytes(buf, tm)
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	total := len(buf) + size + len(unknownTrailer)
	h := w.Header()
	h.Set("Content-Type", protobufType)
	h.Set("Content-Length", strconv.Itoa(total))
	w.WriteHeader(http.StatusOK)
	buf = protowire.AppendTag(buf, 1, protowire.BytesType)
	buf = protowire.AppendBytes(buf, meta)
	for _, raw := range raws {
		buf = protowire.AppendTag(buf, 2, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(len(raw)))
		if len(buf)+len(raw) > listChunk {
			if _, err := w.Write(buf); err != nil {
				return nil // the client went away; nothing more to answer
			}
			buf = buf[:0]
			if len(raw) > listChunk {
				if _, err := w.Write(raw); err != nil {
					return nil
				}
				continue
			}
		}
		buf = append(buf, raw...)
	}
	buf = append(buf, unknownTrailer...)
	w.Write(buf)
	*bp = buf[:0]
	return nil
}

// listChunk is how much of a streamed list is written at once.
const listChunk = 32 << 10

var listBuffers = sync.Pool{New: func() any { b := make([]byte, 0, listChunk+4<<10); return &b }}

// unknownTrailer is what runtime.Unknown's encoding ends with after its Raw field: the
// empty ContentEncoding and ContentType (fields 3 and 4), which gogo's encoding always writes.
var unknownTrailer = []byte{3<<3 | 2, 0, 4<<3 | 2, 0}

func writeBody(w http.ResponseWriter, code int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

// encodeProtoEvent encodes a watch event as kube-apiserver's protobuf watch stream does: a
// 4-byte big-endian length, then a metav1.WatchEvent message (without envelope) whose object
// is the enveloped protobuf object. Errors and conversion failures travel as a Status.
func (c *call) encodeProtoEvent(ev *watchcache.Event) ([]byte, error) {
	typ := string(ev.Type)
	var obj []byte
	var err error
	switch ev.Type {
	case storage.Bookmark:
		bm := &unstructured.Unstructured{Object: map[string]any{"metadata": bookmarkMetadata(ev)}}
		obj, err = c.protoEnvelope(bm, false)
	case storage.ErrorEvent:
		obj, err = statusProto(eventStatus(ev.Err))
	default:
		o, cerr := c.fromStorageDetached(ev.Object)
		if cerr != nil {
			typ = string(storage.ErrorEvent)
			obj, err = statusProto(eventStatus(cerr))
			break
		}
		obj, err = c.protoEnvelope(o, c.memoProto())
	}
	if err != nil {
		return nil, err
	}
	return watchFrame(typ, obj)
}

// protoEnvelope is obj of the call's kind in enveloped protobuf; memo says whether its
// encoding is remembered (never for bookmarks, which name no object).
func (c *call) protoEnvelope(obj *unstructured.Unstructured, memo bool) ([]byte, error) {
	raw, err := protoObject(c.kind, obj, memo)
	if err != nil {
		return nil, err
	}
	return envelope(c.kind.APIVersion(), c.kind.Kind, raw)
}

// statusProto is st in enveloped protobuf, as clients decode ERROR watch events.
func statusProto(st metav1.Status) ([]byte, error) {
	raw, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	return envelope("v1", "Status", raw)
}

// PartialObjectMetadata in protobuf: the metadata of an object of any kind (custom
// resources included), as the metadata client (client-go's, the garbage collector's) asks
// for it first.

// partialAPIVersion is the group-version of PartialObjectMetadata(List).
const partialAPIVersion = "meta.k8s.io/v1"

// protoPartial is the PartialObjectMetadata message of obj (without the envelope),
// remembered in objectProtos when memo is set.
func protoPartial(kind *registry.Kind, obj *unstructured.Unstructured, memo bool) ([]byte, error) {
	k, ok := objectMemoKey(kind, obj, true)
	memo = memo && ok
	if memo {
		if b, ok := objectProtos.get(k); ok {
			return b, nil
		}
	}
	m := &metav1.PartialObjectMetadata{}
	if md, ok := obj.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &m.ObjectMeta); err != nil {
			return nil, fmt.Errorf("convert the metadata of %s %s to protobuf: %w", kind.Kind, obj.GetName(), err)
		}
	}
	b, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if memo {
		objectProtos.put(k, b)
	}
	return b, nil
}

// writePartialProto writes the PartialObjectMetadata of obj as protobuf.
func (c *call) writePartialProto(code int, obj *unstructured.Unstructured) {
	raw, err := protoPartial(c.kind, obj, c.memoProto())
	if err == nil {
		var body []byte
		if body, err = envelope(partialAPIVersion, "PartialObjectMetadata", raw); err == nil {
			writeBody(c.w, code, protobufType, body)
			return
		}
	}
	c.h.log.Error("protobuf encoding failed; answering JSON", "err", err)
	writeJSON(c.w, code, partial(obj))
}

// writePartialProtoList writes a PartialObjectMetadataList as protobuf.
func (c *call) writePartialProtoList(lm metav1.ListMeta, items []*unstructured.Unstructured) {
	memo := c.memoProto()
	if err := streamProtoList(c.w, partialAPIVersion, "PartialObjectMetadataList", lm, items, func(it *unstructured.Unstructured) ([]byte, error) { return protoPartial(c.kind, it, memo) }); err != nil {
		c.fail(err)
	}
}

// encodePartialProtoEvent is encodeProtoEvent for metadata-only watches: the event's
// object is an enveloped PartialObjectMetadata.
func (c *call) encodePartialProtoEvent(ev *watchcache.Event) ([]byte, error) {
	typ := string(ev.Type)
	var raw []byte
	var err error
	switch ev.Type {
	case storage.Bookmark:
		bm := &unstructured.Unstructured{Object: map[string]any{"metadata": bookmarkMetadata(ev)}}
		raw, err = protoPartial(c.kind, bm, false)
	case storage.ErrorEvent:
		var obj []byte
		if obj, err = statusProto(eventStatus(ev.Err)); err == nil {
			return watchFrame(typ, obj)
		}
	default:
		o := ev.Object
		if o.GetAPIVersion() != c.kind.APIVersion() {
			// Conversion may change labels and annotations (as in encodeEvent).
			var cerr error
			if o, cerr = c.fromStorageDetached(ev.Object); cerr != nil {
				var obj []byte
				if obj, err = statusProto(eventStatus(cerr)); err == nil {
					return watchFrame(string(storage.ErrorEvent), obj)
				}
				break
			}
		}
		raw, err = protoPartial(c.kind, o, c.memoProto())
	}
	if err != nil {
		return nil, err
	}
	obj, err := envelope(partialAPIVersion, "PartialObjectMetadata", raw)
	if err != nil {
		return nil, err
	}
	return watchFrame(typ, obj)
}

// watchFrame is one frame of a protobuf watch stream: a 4-byte big-endian length, then a
// metav1.WatchEvent of type typ carrying obj (an enveloped object or Status).
func watchFrame(typ string, obj []byte) ([]byte, error) {
	we := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: obj}}
	b := make([]byte, 4, 4+we.Size())
	n, err := we.MarshalTo(b[4:cap(b)])
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	return b[:4+n], nil
}
