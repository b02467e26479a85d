package openapi

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"kubeos.dev/kube/internal/apiserver/rest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

// Handler serves /openapi/v2 and /openapi/v3[/...]. Safe for concurrent use.
type Handler struct {
	reg *registry.Registry
	// remote is the extension servers' documents (SetRemote), nil when there are none.
	remote Remote

	v2 *handler.OpenAPIService
	v3 *handler3.OpenAPIService
	// v2mux routes /openapi/v2 to the OpenAPIService, which negotiates JSON or protobuf,
	// gzips, and answers If-None-Match.
	v2mux *http.ServeMux

	snap  atomic.Pointer[snapshot]
	build sync.Mutex // serialises rebuilds; held only by the builder goroutine

	// mu guards next and running: next is closed when a rebuild that starts after it was
	// made has finished; running says a builder goroutine works through the requests.
	mu      sync.Mutex
	next    chan struct{}
	running bool
	// Owned by the goroutine holding build: the last fragments by kind; and by name, the
	// shared definitions' direct references and their v2 and v3 forms; and by index key,
	// the version (etag) of the document registered with v3.
	fragments        map[*registry.Kind]*fragment
	defRefs          map[string][]string
	shared2, shared3 map[string]spec.Schema
	published        map[string]string
}

// snapshot is the documents of one registry generation and one generation of the remote
// documents.
type snapshot struct {
	gen, remoteGen uint64
	// local is the registry's v2 document; swagger is local merged with the remote ones.
	local, swagger *spec.Swagger
	// gvs are the registry's v3 documents by index key, with the kinds that made them: a
	// document is rebuilt only when its kinds change.
	gvs map[string]*gvDocument
	// remote are the remote v3 documents by index key.
	remote map[string]RemoteDocument
}

// served reports whether the v3 document of index key is served.
func (s *snapshot) served(key string) bool {
	if _, ok := s.remote[key]; ok {
		return true
	}
	_, ok := s.gvs[key]
	return ok
}

type gvDocument struct {
	kinds []*registry.Kind
	doc   *spec3.OpenAPI
	etag  string
}

// New returns an OpenAPI handler over reg.
func New(reg *registry.Registry) *Handler {
	h := &Handler{
		reg:       reg,
		v3:        handler3.NewOpenAPIService(),
		v2mux:     http.NewServeMux(),
		fragments: map[*registry.Kind]*fragment{},
		defRefs:   map[string][]string{},
		shared2:   map[string]spec.Schema{},
		shared3:   map[string]spec.Schema{},
		published: map[string]string{},
	}
	h.v2 = handler.NewOpenAPIServiceLazy(cached.Func(func() (*spec.Swagger, string, error) {
		s := h.current()
		return s.swagger, "gen-" + strconv.FormatUint(s.gen, 10) + "-" + strconv.FormatUint(s.remoteGen, 10), nil
	}))
	h.v2.RegisterOpenAPIVersionedService("/openapi/v2", h.v2mux)
	return h
}

// ServeHTTP answers GET and HEAD on /openapi/v2, /openapi/v3 and /openapi/v3/<gv>.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the server does not allow this method on the requested resource")
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/openapi/v2":
		h.v2mux.ServeHTTP(w, r)
	case path == "/openapi/v3":
		h.current()
		h.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(path, "/openapi/v3/"):
		s := h.current()
		if !s.served(strings.TrimPrefix(path, "/openapi/v3/")) {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
				"the server could not find the requested resource")
			return
		}
		r2 := r
		if path != r.URL.Path {
			r2 = r.Clone(r.Context())
			r2.URL.Path = path
		}
		h.v3.HandleGroupVersion(w, r2)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			"the server could not find the requested resource")
	}
}

// staleWait is how long a request waits for the documents of a new registry generation
// before it is answered with the previous ones (the rebuild carries on in the
// background): with thousands of kinds a rebuild takes long, and no request should wait
// for it, nor pile up behind it.
const staleWait = 500 * time.Millisecond

// current returns the documents of the registry's and the remote documents' current
// generations, or, when they are not built within staleWait, the previous ones. Requests
// for up-to-date generations take no lock; after a change one builder goroutine rebuilds,
// however many requests ask.
func (h *Handler) current() *snapshot {
	s := h.snap.Load()
	if s != nil && s.gen == h.reg.Generation() && s.remoteGen == h.remoteGeneration() {
		return s
	}
	done := h.requestBuild()
	if s == nil {
		<-done
		return h.snap.Load()
	}
	t := time.NewTimer(staleWait)
	defer t.Stop()
	select {
	case <-done:
		return h.snap.Load()
	case <-t.C:
		return s
	}
}

// requestBuild asks for a rebuild that starts after this call and returns a channel
// closed when it is done.
func (h *Handler) requestBuild() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.next == nil {
		h.next = make(chan struct{})
	}
	ch := h.next
	if !h.running {
		h.running = true
		go h.builder()
	}
	return ch
}

// builder rebuilds until no request is waiting, then exits.
func (h *Handler) builder() {
	for {
		h.mu.Lock()
		ch := h.next
		h.next = nil
		if ch == nil {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		h.build.Lock()
		gen, remoteGen := h.reg.Generation(), h.remoteGeneration()
		if prev := h.snap.Load(); prev == nil || prev.gen != gen || prev.remoteGen != remoteGen {
			h.snap.Store(h.rebuild(gen, remoteGen, prev))
		}
		h.build.Unlock()
		close(ch)
	}
}

// rebuild makes the snapshot of one registry generation and one remote generation: the
// registry's part is reused when only the remote documents changed. Called with h.build
// held.
func (h *Handler) rebuild(gen, remoteGen uint64, prev *snapshot) *snapshot {
	s := &snapshot{gen: gen, remoteGen: remoteGen}
	if prev != nil && prev.gen == gen {
		s.local, s.gvs = prev.local, prev.gvs
	} else {
		s.local, s.gvs = h.buildLocal(gen, h.reg.Kinds(), prev)
	}
	var docs []RemoteDocument
	if h.remote != nil {
		docs = h.remote.OpenAPIDocuments()
	}
	s.swagger = mergeV2(s.local, docs)
	s.remote = remoteV3(docs)
	h.publishV3(s)
	return s
}

// publishV3 registers with the v3 service the document of every index key of s, the
// remote one where there is one, and removes the keys s no longer has. Called with
// h.build held.
func (h *Handler) publishV3(s *snapshot) {
	want := make(map[string]string, len(s.gvs)+len(s.remote))
	for key, d := range s.gvs {
		want[key] = d.etag
	}
	for key, d := range s.remote {
		want[key] = "remote:" + d.V3Etag
	}
	for key, etag := range want {
		if h.published[key] == etag {
			continue
		}
		if d, ok := s.remote[key]; ok {
			h.v3.UpdateGroupVersionLazy(key, cached.Static(d.V3, etag))
		} else {
			h.v3.UpdateGroupVersionLazy(key, cached.Static(s.gvs[key].doc, etag))
		}
		h.published[key] = etag
	}
	for key := range h.published {
		if _, ok := want[key]; !ok {
			h.v3.DeleteGroupVersion(key)
			delete(h.published, key)
		}
	}
}

// buildLocal makes the registry's documents of one generation, reusing the fragments of
// unchanged kinds and the v3 documents of unchanged group-versions. Called with h.build
// held.
func (h *Handler) buildLocal(gen uint64, kinds []*registry.Kind, prev *snapshot) (*spec.Swagger, map[string]*gvDocument) {
	fragments := make(map[*registry.Kind]*fragment, len(kinds))
	byGV := map[string][]*registry.Kind{}
	for _, k := range kinds {
		f := h.fragments[k]
		if f == nil {
			f = buildFragment(k)
		}
		fragments[k] = f
		byGV[f.gv] = append(byGV[f.gv], k)
	}
	h.fragments = fragments

	gvs := make(map[string]*gvDocument, len(byGV))

	// v2: one document with every path and definition.
	sw := newSwagger()
	sw.Parameters = v2Parameters()
	var refs []string
	for _, k := range kinds {
		f := fragments[k]
		for p, item := range f.v2paths {
			sw.Paths.Paths[p] = item
		}
		for name, d := range f.v2defs {
			sw.Definitions[name] = d
		}
		refs = append(refs, f.refs...)
	}
	for _, name := range h.closure(refs) {
		if _, own := sw.Definitions[name]; !own {
			sw.Definitions[name] = h.shared(name, true)
		}
	}

	// v3: one document per group-version.
	for gv, ks := range byGV {
		if old := prevDocument(prev, gv); old != nil && sameKinds(old.kinds, ks) {
			gvs[gv] = old
			continue
		}
		doc := h.groupVersionDocument(ks, fragments)
		gvs[gv] = &gvDocument{kinds: ks, doc: doc, etag: gv + "@" + strconv.FormatUint(gen, 10)}
	}
	return sw, gvs
}

func prevDocument(prev *snapshot, gv string) *gvDocument {
	if prev == nil {
		return nil
	}
	return prev.gvs[gv]
}

func sameKinds(a, b []*registry.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newSwagger() *spec.Swagger {
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0",
		Info: &spec.Info{InfoProps: spec.InfoProps{
			Title:   "Kubernetes",
			Version: "unversioned",
		}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
}

// groupVersionDocument builds the OpenAPI 3 document of the kinds of one group-version.
func (h *Handler) groupVersionDocument(kinds []*registry.Kind, fragments map[*registry.Kind]*fragment) *spec3.OpenAPI {
	paths := &spec3.Paths{Paths: map[string]*spec3.Path{}}
	schemas := map[string]*spec.Schema{}
	var refs []string
	for _, k := range kinds {
		f := fragments[k]
		for p, item := range f.paths {
			paths.Paths[p] = item
		}
		for name, d := range f.v3defs {
			schemas[name] = &d
		}
		refs = append(refs, f.refs...)
	}
	for _, name := range h.closure(refs) {
		if _, own := schemas[name]; !own {
			d := h.shared(name, false)
			schemas[name] = &d
		}
	}
	return &spec3.OpenAPI{
		Version: "3.0.0",
		Info: &spec.Info{InfoProps: spec.InfoProps{
			Title:   "Kubernetes",
			Version: "unversioned",
		}},
		Paths:      paths,
		Components: &spec3.Components{Schemas: schemas},
	}
}

// closure returns names and every shared definition they reference, directly or not,
// sorted. Called with h.build held.
func (h *Handler) closure(names []string) []string {
	seen := map[string]bool{}
	queue := append([]string(nil), names...)
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[name] {
			continue
		}
		seen[name] = true
		next, ok := h.defRefs[name]
		if !ok {
			d := h.shared(name, true)
			set := map[string]bool{}
			collectRefs(&d, set)
			for n := range set {
				next = append(next, n)
			}
			h.defRefs[name] = next
		}
		queue = append(queue, next...)
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// shared returns a shared definition in v2 (made valid for Swagger 2.0) or v3 form. A name
// that cannot be found gets an open object definition, so that the document stays
// resolvable (kubectl refuses a document with a dangling $ref). Called with h.build held.
func (h *Handler) shared(name string, v2 bool) spec.Schema {
	cache, find := h.shared3, definitionV3
	if v2 {
		cache, find = h.shared2, definitionV2
	}
	if d, ok := cache[name]; ok {
		return d
	}
	d, ok := find(name)
	if !ok {
		d = spec.Schema{SchemaProps: spec.SchemaProps{
			Type:        spec.StringOrArray{"object"},
			Description: "The schema of " + name + " is not available.",
		}}
		d.Extensions = spec.Extensions{extPreserveUnkn: true}
	}
	if v2 {
		d = *swagger2Schema(&d)
	}
	cache[name] = d
	return d
}

// writeStatus answers with an API error through the REST handler's one Status writer.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	rest.WriteStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Message: message, Reason: reason, Details: &metav1.StatusDetails{}, Code: int32(code),
	}})
}
