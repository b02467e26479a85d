package aggregator

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilproxy "k8s.io/apiserver/pkg/util/proxy"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// docServer serves OpenAPI documents through kube-openapi's own handlers, as every
// k8s.io/apiserver-based extension server does, and counts the answers by path and code.
type docServer struct {
	v2 *handler.OpenAPIService
	v3 *handler3.OpenAPIService

	mu      sync.Mutex
	answers map[string]int
}

func newDocServer(t *testing.T, v2 *spec.Swagger, v3 *spec3.OpenAPI) (*docServer, *httptest.Server) {
	d := &docServer{v2: handler.NewOpenAPIService(v2), answers: map[string]int{}}
	mux := http.NewServeMux()
	d.v2.RegisterOpenAPIVersionedService("/openapi/v2", mux)
	if v3 != nil {
		d.v3 = handler3.NewOpenAPIService()
		d.v3.UpdateGroupVersion("apis/wardle.example.com/v1alpha1", v3)
		mux.HandleFunc("/openapi/v3", d.v3.HandleDiscovery)
		mux.HandleFunc("/openapi/v3/", d.v3.HandleGroupVersion)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &codeRecorder{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(rec, r)
		d.mu.Lock()
		d.answers[fmt.Sprintf("%s %d", r.URL.Path, rec.code)]++
		d.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return d, srv
}

func (d *docServer) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answers[key]
}

type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (c *codeRecorder) WriteHeader(code int) { c.code = code; c.ResponseWriter.WriteHeader(code) }

func flunderSwagger(description string) *spec.Swagger {
	ref := func(name string) *spec.Schema {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + name)}}
	}
	op := func(def string) *spec.Operation {
		return &spec.Operation{OperationProps: spec.OperationProps{Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{
			StatusCodeResponses: map[int]spec.Response{200: {ResponseProps: spec.ResponseProps{Schema: ref(def)}}}}}}}
	}
	obj := func(d string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Description: d}}
	}
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "wardle"}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{
			"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {PathItemProps: spec.PathItemProps{Get: op("v1alpha1.Flunder")}},
			"/apis/wardle.example.com/v1beta1/namespaces/{namespace}/flunders":  {PathItemProps: spec.PathItemProps{Get: op("v1beta1.Flunder")}},
			"/version": {PathItemProps: spec.PathItemProps{Get: op("version.Info")}},
		}},
		Definitions: spec.Definitions{"v1alpha1.Flunder": obj(description), "v1beta1.Flunder": obj(""), "version.Info": obj("")},
	}}
}

func flunderV3(title string) *spec3.OpenAPI {
	return &spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: title}},
		Paths: &spec3.Paths{Paths: map[string]*spec3.Path{"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {}}}}
}

func testRemote(srv *httptest.Server) (*remote, *url.URL) {
	u, _ := url.Parse(srv.URL)
	return &remote{svc: &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", GroupPriorityMinimum: 2000, VersionPriority: 10}},
		transport: srv.Client().Transport.(*http.Transport)}, u
}

func paths(sw *spec.Swagger) []string {
	var out []string
	for p := range sw.Paths.Paths {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func TestDownloadOpenAPI(t *testing.T) {
	a := &Aggregator{opts: Options{Log: slog.New(slog.DiscardHandler)}}
	ctx := context.Background()
	now := time.Now()
	d, srv := newDocServer(t, flunderSwagger("first"), flunderV3("first"))
	rm, target := testRemote(srv)

	// First download: v2 filtered to the group-version, and its v3 document.
	doc, err := a.download(ctx, target, rm, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(doc.v2); !slices.Equal(got, []string{"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"}) {
		t.Errorf("v2 paths %v", got)
	}
	if _, ok := doc.v2.Definitions["v1beta1.Flunder"]; ok || doc.v2.Definitions["v1alpha1.Flunder"].Description != "first" {
		t.Errorf("v2 definitions %v", doc.v2.Definitions)
	}
	if doc.v3 == nil || doc.v3.Info.Title != "first" || doc.v3Etag == "" {
		t.Fatalf("v3 %+v etag %q", doc.v3, doc.v3Etag)
	}

	// Nothing changed: v2 answers 304 and the v3 document is not read again.
	again, err := a.download(ctx, target, rm, doc, now)
	if err != nil {
		t.Fatal(err)
	}
	if again.v2 != doc.v2 || again.v3 != doc.v3 || d.count("/openapi/v2 304") != 1 || d.count("/openapi/v3/apis/wardle.example.com/v1alpha1 200") != 1 {
		t.Errorf("unchanged documents read again: %v", d.answers)
	}

	// Both changed: both read again.
	if err := d.v2.UpdateSpec(flunderSwagger("second")); err != nil {
		t.Fatal(err)
	}
	d.v3.UpdateGroupVersion("apis/wardle.example.com/v1alpha1", flunderV3("second"))
	changed, err := a.download(ctx, target, rm, again, now)
	if err != nil {
		t.Fatal(err)
	}
	if changed.v2.Definitions["v1alpha1.Flunder"].Description != "second" || changed.v3.Info.Title != "second" || changed.v3Etag == again.v3Etag {
		t.Errorf("changed documents: v2 %q, v3 %q", changed.v2.Definitions["v1alpha1.Flunder"].Description, changed.v3.Info.Title)
	}

	// A server without /openapi/v3: a document converted from v2, kept while v2 is.
	_, legacySrv := newDocServer(t, flunderSwagger("legacy"), nil)
	rm, target = testRemote(legacySrv)
	legacy, err := a.download(ctx, target, rm, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if legacy.v3 == nil || legacy.v3.Paths.Paths["/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"] == nil ||
		legacy.v3.Components.Schemas["v1alpha1.Flunder"] == nil || legacy.v3.Components.Schemas["v1beta1.Flunder"] != nil {
		t.Errorf("converted v3 %+v", legacy.v3)
	}
	if again, err := a.download(ctx, target, rm, legacy, now); err != nil || again.v3 != legacy.v3 {
		t.Errorf("unchanged legacy document converted again (%v)", err)
	}

	// A server that cannot answer: an error, and the caller keeps what it had.
	legacySrv.Close()
	if _, err := a.download(ctx, target, rm, legacy, now); err == nil {
		t.Error("download from a closed server succeeded")
	}
}

// TestSyncOpenAPI: the download loop's pass downloads an available remote's documents once,
// again after openAPIRefresh (a 304: nothing changes), backs off after a failure, and
// forgets them when the remote goes.
func TestSyncOpenAPI(t *testing.T) {
	d, srv := newDocServer(t, flunderSwagger("first"), flunderV3("first"))
	failing := atomic.Bool{}
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		inner.ServeHTTP(w, r)
	})
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())

	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slicesIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}})
	ready, p, name := true, int32(port), "https"
	_ = slicesIdx.Add(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "api"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{u.Hostname()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:     []discoveryv1.EndpointPort{{Name: &name, Port: &p}}})
	getter, _ := utilproxy.NewEndpointSliceListerGetter(discoverylisters.NewEndpointSliceLister(slicesIdx))
	a := &Aggregator{opts: Options{Log: slog.New(slog.DiscardHandler)}, services: corelisters.NewServiceLister(services), slices: getter,
		remotes: map[schema.GroupVersion]*remote{}, docs: map[schema.GroupVersion]*openAPIDoc{}, openAPIRetries: map[schema.GroupVersion]openAPIRetry{}}
	rm, _ := testRemote(srv)
	svcPort := int32(443)
	rm.svc.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api", Port: &svcPort}
	rm.resources = &metav1.APIResourceList{}
	gv := schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}
	a.remotes[gv] = rm

	ctx := context.Background()
	t0 := time.Now()
	a.syncOpenAPI(ctx, t0)
	docs := a.OpenAPIDocuments()
	if len(docs) != 1 || docs[0].V2 == nil || docs[0].V3 == nil || a.OpenAPIGeneration() != 1 {
		t.Fatalf("after the first pass: %d documents, generation %d", len(docs), a.OpenAPIGeneration())
	}
	a.syncOpenAPI(ctx, t0.Add(time.Second))
	if n := d.count("/openapi/v2 200") + d.count("/openapi/v2 304"); n != 1 {
		t.Errorf("/openapi/v2 read %d times within a minute", n)
	}
	a.syncOpenAPI(ctx, t0.Add(openAPIRefresh+time.Second))
	if d.count("/openapi/v2 304") != 1 || a.OpenAPIGeneration() != 1 {
		t.Errorf("refresh: %v, generation %d", d.answers, a.OpenAPIGeneration())
	}

	// Failing: tried again only after the back-off; the last documents stay.
	failing.Store(true)
	t1 := t0.Add(3 * openAPIRefresh)
	a.syncOpenAPI(ctx, t1)
	a.syncOpenAPI(ctx, t1.Add(openAPIRetryMin/2))
	calls := func() int { return d.count("/openapi/v2 200") + d.count("/openapi/v2 304") }
	before := calls()
	failing.Store(false)
	a.syncOpenAPI(ctx, t1.Add(openAPIRetryMin/2+time.Second))
	if calls() != before {
		t.Error("a failed download was retried before its back-off")
	}
	if len(a.OpenAPIDocuments()) != 1 {
		t.Error("a failed download dropped the last documents")
	}
	a.syncOpenAPI(ctx, t1.Add(openAPIRetryMin+time.Second))
	if calls() != before+1 || len(a.openAPIRetries) != 0 {
		t.Errorf("not retried after the back-off (%d calls, was %d)", calls(), before)
	}

	// The remote gone: its documents go.
	delete(a.remotes, gv)
	gen := a.OpenAPIGeneration()
	a.syncOpenAPI(ctx, t1.Add(time.Hour))
	if len(a.OpenAPIDocuments()) != 0 || a.OpenAPIGeneration() == gen {
		t.Error("documents of a removed remote kept")
	}
}
