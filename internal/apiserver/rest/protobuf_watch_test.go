package rest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

// TestProtobufWatchFrames decodes encodeProtoEvent's frames with client-go's own protobuf
// watch decoder (length-delimited framer, raw WatchEvent, enveloped objects): an object
// event, a bookmark ending the initial events, and an ERROR event with a 410 Status.
func TestProtobufWatchFrames(t *testing.T) {
	var kind *registry.Kind
	for _, k := range registry.Builtins() {
		if k.Resource == "configmaps" {
			kind = k
		}
	}
	c := &call{kind: kind, h: &Handler{}}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns", "resourceVersion": "7"},
		"data":     map[string]any{"k": "v"},
	}}
	events := []*watchcache.Event{
		{Event: storage.Event{Type: storage.Added, Object: cm, Revision: 7}},
		{Event: storage.Event{Type: storage.Bookmark, Revision: 9}, InitialEventsEnd: true},
		{Event: storage.Event{Type: storage.ErrorEvent, Err: storage.ErrCompacted}},
	}
	var stream bytes.Buffer
	for _, ev := range events {
		b, err := c.encodeProtoEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(b)
	}
	frames := protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(&stream))
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, protobuf.NewRawSerializer(clientscheme.Scheme, clientscheme.Scheme)),
		protobuf.NewSerializer(clientscheme.Scheme, clientscheme.Scheme))

	typ, obj, err := dec.Decode()
	if got, ok := obj.(*corev1.ConfigMap); err != nil || typ != watch.Added || !ok || got.Name != "a" || got.Data["k"] != "v" || got.ResourceVersion != "7" {
		t.Fatalf("object event: %v %#v %v", typ, obj, err)
	}
	typ, obj, err = dec.Decode()
	if got, ok := obj.(*corev1.ConfigMap); err != nil || typ != watch.Bookmark || !ok || got.ResourceVersion != "9" || got.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("bookmark: %v %#v %v", typ, obj, err)
	}
	typ, obj, err = dec.Decode()
	st, ok := obj.(*metav1.Status)
	if err != nil || typ != watch.Error || !ok || st.Code != http.StatusGone || !apierrors.IsResourceExpired(apierrors.FromObject(st)) {
		t.Fatalf("error event: %v %#v %v", typ, obj, err)
	}
	if _, _, err := dec.Decode(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}
