package rest

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

// Caches gives the watch cache of a resource, starting it on first use; indexed are the
// fields it must index (the kind's IndexedFields).
type Caches interface {
	Get(prefix string, attrs storage.AttrFunc, indexed ...string) *watchcache.Cache
	// Packed reports whether the cache of prefix keeps its objects packed.
	Packed(prefix string) bool
}

var _ Caches = (*watchcache.Set)(nil)

// Options configure the handler.
type Options struct {
	Registry *registry.Registry
	Store    *storage.Store
	Caches   Caches
	// Now is the clock for timestamps; nil means time.Now.
	Now func() time.Time
	// MinWatchTimeout: a watch without timeoutSeconds ends after a random time between this
	// and twice this (as kube-apiserver: 30 min). Clients re-watch from their last version.
	MinWatchTimeout time.Duration
	Log             *slog.Logger
	// GarbageCollector says a garbage collector runs: deletes with the Foreground and
	// Orphan policies then add its finalizers. Without one they would wait forever.
	GarbageCollector bool
	// CollectorHint, when set, is called (it must not block) after a write stored an
	// object the garbage collector must see: one with ownerReferences or a
	// garbage-collection finalizer. The collector watches custom resources only once they
	// have objects; this tells it at once.
	CollectorHint func(schema.GroupResource)
	// Admission, when set, admits every create, update and delete, and every request to a
	// connect subresource (operation CONNECT) before the Connect handler sees it.
	Admission admission.Interface
	// Done, when closed, ends every watch being served (server shutdown).
	Done <-chan struct{}
	// Connect serves the connect subresources a kind names in registry.Kind.Connect
	// (pods/log, pods/exec, nodes/proxy, ...): the request arrives authenticated and
	// authorized, with its request.Info in the context. nil: they answer 404.
	Connect http.Handler
	// OpenWatches, when set, counts the watches being served by resource.
	OpenWatches *prometheus.GaugeVec
}

// Handler serves every resource request.
type Handler struct {
	reg    *registry.Registry
	store  *storage.Store
	caches Caches
	now    func() time.Time
	minWT  time.Duration
	log    *slog.Logger

	openWatches *prometheus.GaugeVec
	gc          bool
	gcHint      func(schema.GroupResource)
	done        <-chan struct{}
	admission   admission.Interface
	connect     http.Handler
}

// New returns the REST handler.
func New(o Options) *Handler {
	h := &Handler{reg: o.Registry, store: o.Store, caches: o.Caches, now: o.Now, minWT: o.MinWatchTimeout, log: o.Log, openWatches: o.OpenWatches, gc: o.GarbageCollector, gcHint: o.CollectorHint, done: o.Done, admission: o.Admission, connect: o.Connect}
	if h.now == nil {
		h.now = time.Now
	}
	if h.minWT == 0 {
		h.minWT = 30 * time.Minute
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// call is one resource request being served.
type call struct {
	h    *Handler
	w    http.ResponseWriter
	r    *http.Request
	ctx  context.Context
	info *request.Info
	kind *registry.Kind
	gr   schema.GroupResource
	// validated holds the internal-type objects the kind's validation of the write made
	// (see registry.Validated), for validating admission.
	validated *registry.Validated
	// admitted holds the internal-type objects mutating admission left (see
	// admission.Attributes.Admitted), for the kind's validation; nil once a step changed
	// the object in place.
	admitted *registry.Validated
	// prepared holds the typed object the kind's PrepareFor* made the object's content from
	// (registry.TypedPreparer), for mutating admission.
	prepared *registry.Validated
}

func (c *call) fail(err error) {
	WriteStatus(c.w, statusError(err, c.gr, c.info.Name))
}

// ServeHTTP serves a resource request. The request context must carry the request.Info.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info, ok := request.InfoFrom(r.Context())
	if !ok {
		info = request.Parse(r)
	}
	c := &call{h: h, w: w, r: r, ctx: r.Context(), info: info}
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	c.gr = gvr.GroupResource()
	kind, ok := h.reg.Lookup(gvr)
	if !ok && !h.reg.ServesGroupVersion(gvr.GroupVersion()) {
		// A path no served group-version owns falls through kube-apiserver's handler chain
		// to its not-found handler, which answers plain text; client-go then words the
		// error itself ("the server could not find the requested resource (get x.y)").
		http.NotFound(w, r)
		return
	}
	if !ok || !info.IsResourceRequest {
		WriteStatus(w, ResourceNotFound())
		return
	}
	c.kind = kind
	if kind.DeprecationWarning != "" {
		// Every request to a deprecated version, whatever its outcome, as upstream.
		addWarning(w, kind.DeprecationWarning)
	}
	if info.Subresource != "" && info.Name != "" && slices.Contains(kind.Connect, info.Subresource) {
		c.connect() // connect.go: admitted, then the Connect handler
		return
	}
	if len(info.Parts) > 3 {
		WriteStatus(w, ResourceNotFound())
		return
	}
	if !kind.Namespaced && info.Namespace != "" && !(kind.Resource == "namespaces" && kind.Group == "") {
		WriteStatus(w, ResourceNotFound())
		return
	}
	if sr, ok := kind.Subresources[info.Subresource]; ok && info.Subresource != "" {
		if info.Verb != "create" || info.Name == "" {
			WriteStatus(w, methodNotSupported(c.gr, info.Verb))
			return
		}
		c.createSubresource(sr)
		return
	}
	switch info.Subresource {
	case "":
	case "status":
		if !kind.Status {
			WriteStatus(w, ResourceNotFound())
			return
		}
	case "scale":
		if kind.Scale == nil {
			WriteStatus(w, ResourceNotFound())
			return
		}
	case "finalize":
		if kind.Resource != "namespaces" || kind.Group != "" {
			WriteStatus(w, ResourceNotFound())
			return
		}
	default:
		if kind.FieldSubresources[info.Subresource] != nil {
			break
		}
		WriteStatus(w, ResourceNotFound())
		return
	}
	if info.Subresource != "" && info.Verb != "get" && info.Verb != "update" && info.Verb != "patch" {
		WriteStatus(w, methodNotSupported(c.gr, info.Verb))
		return
	}
	if (info.Verb == "update" || info.Verb == "patch") && info.Name == "" {
		// A collection takes no PUT or PATCH.
		WriteStatus(w, methodNotSupported(c.gr, info.Verb))
		return
	}
	if !kind.Supports(info.Verb) {
		WriteStatus(w, methodNotSupported(c.gr, info.Verb))
		return
	}
	if kind.Read != nil {
		c.readComputed()
		return
	}
	if kind.Create != nil {
		c.createComputed()
		return
	}
	switch info.Verb {
	case "get":
		c.get()
	case "list":
		c.list()
	case "watch":
		c.watch()
	case "create":
		c.create()
	case "update":
		c.update()
	case "patch":
		c.patch()
	case "delete":
		c.delete()
	case "deletecollection":
		c.deleteCollection()
	default:
		WriteStatus(w, methodNotSupported(c.gr, info.Verb))
	}
}

func methodNotSupported(gr schema.GroupResource, verb string) *apierrors.StatusError {
	return apierrors.NewMethodNotSupported(gr, verb)
}

// key is the storage key of the addressed object.
func (c *call) key() string { return c.kind.Key(c.objNamespace(), c.info.Name) }

// objNamespace is the namespace the object lives in ("" for cluster-scoped kinds).
func (c *call) objNamespace() string {
	if !c.kind.Namespaced {
		return ""
	}
	return c.info.Namespace
}

// listPrefix is the storage prefix a list or watch covers.
func (c *call) listPrefix() string {
	if c.kind.Namespaced && c.info.Namespace != "" {
		return c.kind.NamespacePrefix(c.info.Namespace)
	}
	return c.kind.Prefix()
}
