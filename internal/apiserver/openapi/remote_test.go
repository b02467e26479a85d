package openapi

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// fakeRemote stands for the aggregation layer's downloads (a pure data source: the
// downloads themselves are tested against sample-apiserver in test/workload).
type fakeRemote struct {
	mu   sync.Mutex
	gen  atomic.Uint64
	docs []RemoteDocument
}

func (f *fakeRemote) OpenAPIGeneration() uint64 { return f.gen.Load() }
func (f *fakeRemote) OpenAPIDocuments() []RemoteDocument {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.docs
}
func (f *fakeRemote) set(docs ...RemoteDocument) {
	f.mu.Lock()
	f.docs = docs
	f.mu.Unlock()
	f.gen.Add(1)
}

const (
	flunderDef  = "com.example.wardle.v1alpha1.Flunder"
	objectMeta  = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	flunderPath = "/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders/{name}"
)

// wardleV2 is a remote v2 document as an extension server's, filtered to its group-version:
// a path, its kind's definition and an ObjectMeta that differs from the registry's.
func wardleV2() *spec.Swagger {
	flunder := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{
		"metadata": {SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + objectMeta)}},
		"spec":     *spec.StringProperty(),
	}}}
	flunder.Extensions = spec.Extensions{extGVK: []any{map[string]any{"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"}}}
	get := &spec.Operation{OperationProps: spec.OperationProps{ID: "readFlunder", Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{
		StatusCodeResponses: map[int]spec.Response{200: {ResponseProps: spec.ResponseProps{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + flunderDef)}}}}}}}}}
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0",
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{flunderPath: {PathItemProps: spec.PathItemProps{Get: get}},
			// A path the registry serves too: the registry's wins.
			"/api/v1/namespaces/{namespace}/configmaps": {PathItemProps: spec.PathItemProps{Get: get}}}},
		Definitions: spec.Definitions{flunderDef: flunder,
			objectMeta: {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Description: "the extension server's own"}}},
	}}
}

func wardleV3() *spec3.OpenAPI {
	return &spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "wardle", Version: "v1alpha1"}},
		Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{flunderPath: {}}},
		Components: &spec3.Components{Schemas: map[string]*spec.Schema{flunderDef: spec.StringProperty()}}}
}

func v2Document(t *testing.T, h http.Handler) *spec.Swagger {
	t.Helper()
	resp := get(t, h, "/openapi/v2", "application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /openapi/v2: %d", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	var sw spec.Swagger
	if err := json.Unmarshal(body, &sw); err != nil {
		t.Fatal(err)
	}
	return &sw
}

func v3Index(t *testing.T, h http.Handler) map[string]string {
	t.Helper()
	var index struct {
		Paths map[string]struct{ ServerRelativeURL string } `json:"paths"`
	}
	if err := json.NewDecoder(get(t, h, "/openapi/v3", "application/json").Body).Decode(&index); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range index.Paths {
		out[k] = v.ServerRelativeURL
	}
	return out
}

func TestRemoteDocuments(t *testing.T) {
	h := New(newRegistry(testKinds()...))
	remote := &fakeRemote{}
	h.SetRemote(remote)
	local := v2Document(t, h)
	if _, ok := local.Definitions[flunderDef]; ok {
		t.Fatal("a remote definition before any remote document")
	}

	// A registry definition without extensions that the remote document has too, with
	// its group-version-kind: the merge adds the kind to a copy.
	var plain string
	for _, name := range slices.Sorted(maps.Keys(h.current().local.Definitions)) {
		if h.current().local.Definitions[name].Extensions == nil {
			plain = name
			break
		}
	}
	if plain == "" {
		t.Fatal("no registry definition without extensions")
	}
	withGVK := h.current().local.Definitions[plain]
	withGVK.Extensions = spec.Extensions{extGVK: []any{map[string]any{"group": "wardle.example.com", "version": "v1alpha1", "kind": "Plain"}}}
	v2 := wardleV2()
	v2.Definitions[plain] = withGVK

	wardle := schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}
	remote.set(RemoteDocument{GroupVersion: wardle, V2: v2, V3: wardleV3(), V3Etag: "h1"})

	// v2: the remote path and definitions merged in; the registry's path kept; the
	// conflicting ObjectMeta renamed, and the registry's left as it was.
	sw := v2Document(t, h)
	if _, ok := sw.Paths.Paths[flunderPath]; !ok {
		t.Errorf("merged v2 lacks %s", flunderPath)
	}
	if op := sw.Paths.Paths["/api/v1/namespaces/{namespace}/configmaps"].Get; op == nil || op.ID == "readFlunder" {
		t.Errorf("the registry's configmaps path was replaced: %+v", op)
	}
	if d, ok := sw.Definitions[flunderDef]; !ok || !slicesEqual(gvkOf(d.Extensions), []string{"wardle.example.com/v1alpha1/Flunder"}) {
		t.Errorf("merged v2 definition %s: %v", flunderDef, d.Extensions)
	}
	if got := gvkOf(sw.Definitions[plain].Extensions); !slicesEqual(got, []string{"wardle.example.com/v1alpha1/Plain"}) {
		t.Errorf("%s: group-version-kinds %v after the merge", plain, got)
	}
	if h.current().local.Definitions[plain].Extensions != nil {
		t.Errorf("the merge changed the registry's %s", plain)
	}
	if sw.Definitions[objectMeta].Description != local.Definitions[objectMeta].Description {
		t.Errorf("the registry's ObjectMeta changed: %q", sw.Definitions[objectMeta].Description)
	}
	renamed := sw.Definitions[objectMeta+"_v2"]
	if ref := metadataRef(sw); renamed.Description != "the extension server's own" || ref != "#/definitions/"+objectMeta+"_v2" {
		t.Errorf("conflicting definition not renamed: %q, ref %q", renamed.Description, ref)
	}
	if len(remote.docs[0].V2.Paths.Paths) != 2 || metadataRef(remote.docs[0].V2) != "#/definitions/"+objectMeta {
		t.Error("the merge changed the remote document")
	}
	if len(v2Parameters()) != len(local.Parameters) {
		t.Error("the merge changed the registry's shared parameters")
	}

	// v3: the remote group-version listed, served with the remote document.
	index := v3Index(t, h)
	u, ok := index["apis/wardle.example.com/v1alpha1"]
	if !ok || index["api/v1"] == "" {
		t.Fatalf("v3 index %v", index)
	}
	var doc spec3.OpenAPI
	if err := json.NewDecoder(get(t, h, u, "application/json").Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Info == nil || doc.Info.Title != "wardle" || doc.Components.Schemas[flunderDef] == nil {
		t.Errorf("v3 document %+v", doc.Info)
	}

	// A changed remote document changes its hash.
	v3 := wardleV3()
	v3.Info.Title = "wardle 2"
	remote.set(RemoteDocument{GroupVersion: wardle, V2: wardleV2(), V3: v3, V3Etag: "h2"})
	if u2 := v3Index(t, h)["apis/wardle.example.com/v1alpha1"]; u2 == u || u2 == "" {
		t.Errorf("hash unchanged after the document changed: %s", u2)
	}

	// A remote group-version the registry serves replaces the registry's document, and
	// the registry's comes back when the remote one goes.
	localURL := index["apis/example.com/v1"]
	remote.set(RemoteDocument{GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1"}, V3: wardleV3(), V3Etag: "x"})
	if got := v3Index(t, h)["apis/example.com/v1"]; got == localURL {
		t.Error("a remote document did not replace the registry's")
	}

	// The remote documents gone: everything as before.
	remote.set()
	sw = v2Document(t, h)
	if _, ok := sw.Paths.Paths[flunderPath]; ok {
		t.Error("remote path still in v2")
	}
	if _, ok := sw.Definitions[flunderDef]; ok {
		t.Error("remote definition still in v2")
	}
	index = v3Index(t, h)
	if _, ok := index["apis/wardle.example.com/v1alpha1"]; ok {
		t.Error("remote group-version still in the v3 index")
	}
	if index["apis/example.com/v1"] != localURL {
		t.Errorf("the registry's example.com/v1 document is not back: %s, was %s", index["apis/example.com/v1"], localURL)
	}
	if nf := get(t, h, "/openapi/v3/apis/wardle.example.com/v1alpha1", "application/json"); nf.StatusCode != 404 {
		t.Errorf("removed group-version: %d", nf.StatusCode)
	}
}

func metadataRef(sw *spec.Swagger) string {
	ref := sw.Definitions[flunderDef].Properties["metadata"].Ref
	return ref.String()
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// BenchmarkRemoteChange5000: a remote document changes beside 5,000 kinds; the merge is
// redone, the registry's part reused.
func BenchmarkRemoteChange5000(b *testing.B) {
	h := New(newRegistry(syntheticKinds(5000)...))
	remote := &fakeRemote{}
	h.SetRemote(remote)
	h.current()
	wardle := schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}
	b.ReportAllocs()
	for b.Loop() {
		remote.set(RemoteDocument{GroupVersion: wardle, V2: wardleV2(), V3: wardleV3(), V3Etag: "a"})
		h.current()
		remote.set()
		h.current()
	}
}
