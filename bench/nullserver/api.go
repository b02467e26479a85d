package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

const protobufType = runtime.ContentTypeProtobuf // application/vnd.kubernetes.protobuf

// encoded is one canned response in the two formats a client may ask for.
type encoded struct{ protobuf, json []byte }

// nullAPI answers the requests of bench/apibench and bench/crdbench P2 without doing their work.
type nullAPI struct {
	configMap, configMapList encoded
	logged                   sync.Map // "METHOD path" of unexpected requests already logged
}

func newNullAPI() (*nullAPI, error) {
	cm := func(i int) corev1.ConfigMap {
		name := fmt.Sprintf("cm-%04d", i)
		return corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: map[string]string{"app": "bench"},
				UID: "00000000-0000-0000-0000-000000000000", ResourceVersion: strconv.Itoa(i + 1),
				CreationTimestamp: metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
			Data: map[string]string{"key": "value", "n": name},
		}
	}
	one := cm(0)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "500"}}
	for i := range 500 {
		list.Items = append(list.Items, cm(i))
	}
	a := &nullAPI{}
	var err error
	if a.configMap, err = encode(&one); err != nil {
		return nil, err
	}
	if a.configMapList, err = encode(list); err != nil {
		return nil, err
	}
	return a, nil
}

// encode encodes obj as a v1 object in protobuf and JSON, with its apiVersion and kind.
func encode(obj runtime.Object) (encoded, error) {
	var e encoded
	for _, f := range []struct {
		mediaType string
		out       *[]byte
	}{{protobufType, &e.protobuf}, {runtime.ContentTypeJSON, &e.json}} {
		info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), f.mediaType)
		if !ok {
			return e, fmt.Errorf("no serializer for %s", f.mediaType)
		}
		b, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
		if err != nil {
			return e, fmt.Errorf("encoding %T as %s: %w", obj, f.mediaType, err)
		}
		*f.out = b
	}
	return e, nil
}

func (a *nullAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/namespaces", echo(http.StatusCreated))
	mux.HandleFunc("POST /api/v1/namespaces/{ns}/configmaps", echo(http.StatusCreated))
	mux.HandleFunc("PUT /api/v1/namespaces/{ns}/configmaps/{name}", echo(http.StatusOK))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/configmaps/{name}", a.canned(&a.configMap))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/configmaps", a.canned(&a.configMapList))
	mux.HandleFunc("POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions", echo(http.StatusCreated))
	mux.HandleFunc("POST /apis/{group}/{version}/namespaces/{ns}/{resource}", echo(http.StatusCreated)) // custom resources
	mux.HandleFunc("/", a.notFound)
	return mux
}

// echo answers a create or update with the object the client sent, as a server that stored
// it unchanged would.
func echo(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client went away
		}
		write(w, code, r.Header.Get("Content-Type"), body)
	}
}

func (a *nullAPI) canned(e *encoded) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" && r.URL.Query().Has("watch") {
			a.notFound(w, r)
			return
		}
		if strings.Contains(r.Header.Get("Accept"), protobufType) {
			write(w, http.StatusOK, protobufType, e.protobuf)
			return
		}
		write(w, http.StatusOK, runtime.ContentTypeJSON, e.json)
	}
}

// notFound refuses what the benchmarks are not expected to send, and logs it once.
func (a *nullAPI) notFound(w http.ResponseWriter, r *http.Request) {
	what := r.Method + " " + r.URL.RequestURI()
	if _, seen := a.logged.LoadOrStore(what, true); !seen {
		fmt.Fprintln(os.Stderr, "nullserver: not served:", what)
	}
	body, _ := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
		Message: "the null server does not serve " + what,
	})
	write(w, http.StatusNotFound, runtime.ContentTypeJSON, body)
}

func write(w http.ResponseWriter, code int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}
