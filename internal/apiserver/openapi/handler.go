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
	// shared definitions' direct references and their v2 and v3 forms.
	fragments        map[*registry.Kind]*fragment
	defRefs          map[string][]string
	shared2, shared3 map[string]spec.Schema
}

// snapshot is the documents of one registry generation.
type snapshot struct {
	gen     uint64
	swagger *spec.Swagger
	// gvs are the v3 documents by index key, with the kinds that made them: a document is
	// rebuilt only when its kinds change.
	gvs map[string]*gvDocument
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
	}
	h.v2 = handler.NewOpenAPIServiceLazy(cached.Func(func() (*spec.Swagger, string, error) {
		s := h.current()
		return s.swagger, "gen-" + strconv.FormatUint(s.gen, 10), nil
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
		if _, ok := s.gvs[strings.TrimPrefix(path, "/openapi/v3/")]; !ok {
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

// current returns the documents of the registry's current generation, or, when they are
// not built within staleWait, the previous ones. Requests for an up-to-date generation
// take no lock; after a change one builder goroutine rebuilds, however many requests ask.
func (h *Handler) current() *snapshot {
	s := h.snap.Load()
	if s != nil && s.gen == h.reg.Generation() {
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
		gen := h.reg.Generation()
		if prev := h.snap.Load(); prev == nil || prev.gen != gen {
			h.snap.Store(h.rebuild(gen, h.reg.Kinds(), prev))
		}
		h.build.Unlock()
		close(ch)
	}
}

// rebuild makes the snapshot of one generation, reusing the fragments of unchanged kinds
// and the v3 documents of unchanged group-versions. Called with h.build held.
func (h *Handler) rebuild(gen uint64, kinds []*registry.Kind, prev *snapshot) *snapshot {
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

	s := &snapshot{gen: gen, gvs: make(map[string]*gvDocument, len(byGV))}

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
	s.swagger = sw

	// v3: one document per group-version.
	for gv, ks := range byGV {
		if old := prevDocument(prev, gv); old != nil && sameKinds(old.kinds, ks) {
			s.gvs[gv] = old
			continue
		}
		doc := h.groupVersionDocument(ks, fragments)
		s.gvs[gv] = &gvDocument{kinds: ks, doc: doc, etag: gv + "@" + strconv.FormatUint(gen, 10)}
		h.v3.UpdateGroupVersionLazy(gv, cached.Static(doc, s.gvs[gv].etag))
	}
	if prev != nil {
		for gv := range prev.gvs {
			if _, ok := s.gvs[gv]; !ok {
				h.v3.DeleteGroupVersion(gv)
			}
		}
	}
	return s
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
