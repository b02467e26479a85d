package request

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
)

// Info describes one API request.
type Info struct {
	// IsResourceRequest is false for discovery, health, OpenAPI and other non-resource paths.
	IsResourceRequest bool
	// Path is the URL path.
	Path string
	// Verb is a Kubernetes verb: get, list, watch, create, update, patch, delete,
	// deletecollection, or VerbUnknown for another method; for non-resource requests the
	// lower-case HTTP method.
	Verb string
	// APIPrefix is "api" or "apis".
	APIPrefix            string
	APIGroup, APIVersion string
	Namespace, Resource  string
	Subresource, Name    string
	// Parts are the path segments after the namespace (or version for cluster paths).
	Parts []string
	// SelectorName is, for a list or watch without a name, the name its fieldSelector
	// requires (metadata.name=X): authorizers decide on it as on a name (AuthzName), as
	// upstream's request info does, so a role limited to resourceNames can list and watch
	// its objects.
	SelectorName string
	// FieldSelector and LabelSelector are a list's, watch's or deletecollection's selectors
	// as sent, for authorizers that decide on them (a node may list only its own pods, by
	// spec.nodeName), as upstream's request info carries them.
	FieldSelector, LabelSelector string
	// UserAgent is the request's User-Agent header: authorizers that constrain how a user
	// calls (AccessPolicy via) read it here.
	UserAgent string
	// Impersonator is the authenticated user when the request impersonates another (the
	// request's user is then the impersonated one), else "".
	Impersonator string
}

// AuthzName is the name authorizers decide on: Name, or SelectorName for a list or watch.
func (i *Info) AuthzName() string {
	if i.Name == "" {
		return i.SelectorName
	}
	return i.Name
}

// VerbUnknown is the verb of a resource request whose HTTP method maps to no Kubernetes verb.
const VerbUnknown = "unknown"

type infoKey struct{}

// WithInfo returns a context that carries info.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the Info stored in ctx, if any.
func InfoFrom(ctx context.Context) (*Info, bool) {
	info, ok := ctx.Value(infoKey{}).(*Info)
	return info, ok
}

// Parse reads the request path and method. It never fails: paths that do not name a
// resource come back with IsResourceRequest false.
//
// Resource paths:
//
//	/api/v1/<resource>[/<name>[/<subresource>]]
//	/api/v1/namespaces/<ns>/<resource>[/<name>[/<subresource>]]
//	/apis/<group>/<version>/... likewise
//	/api/v1/watch/... and /apis/<g>/<v>/watch/... (deprecated watch paths)
func Parse(r *http.Request) *Info {
	info := &Info{Path: r.URL.Path, Verb: lowerMethod(r.Method), UserAgent: r.UserAgent()}
	parts := splitPath(r.URL.Path)
	if len(parts) < 1 || (parts[0] != "api" && parts[0] != "apis") || slices.Contains(parts, "") {
		// An empty segment ("//") names nothing; the mux redirects such paths to their
		// clean form.
		return info
	}
	info.APIPrefix = parts[0]
	parts = parts[1:]
	if info.APIPrefix == "apis" {
		if len(parts) < 1 {
			return info
		}
		info.APIGroup = parts[0]
		parts = parts[1:]
	}
	if len(parts) < 1 {
		return info
	}
	info.APIVersion = parts[0]
	parts = parts[1:]
	if len(parts) < 1 {
		return info
	}
	info.IsResourceRequest = true
	watchPath := false
	if parts[0] == "watch" {
		watchPath = true
		parts = parts[1:]
		if len(parts) < 1 {
			info.IsResourceRequest = false
			return info
		}
	}
	// namespaces/<ns>/<resource>... is a namespaced request; namespaces[/<name>[/<sub>]]
	// addresses the namespace object itself.
	if parts[0] == "namespaces" && len(parts) >= 2 {
		info.Namespace = parts[1]
		if len(parts) >= 3 && !(len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize")) {
			parts = parts[2:]
		}
	}
	info.Parts = parts
	info.Resource = parts[0]
	if len(parts) >= 2 {
		info.Name = parts[1]
	}
	if len(parts) >= 3 {
		info.Subresource = parts[2]
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case info.Name != "":
			info.Verb = "get"
			if watchPath {
				info.Verb = "watch"
			}
		case watchPath || isTrue(r.URL.Query().Get("watch")):
			info.Verb = "watch"
		default:
			info.Verb = "list"
		}
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		if info.Name == "" {
			info.Verb = "deletecollection"
		} else {
			info.Verb = "delete"
		}
	default:
		// Methods are case-sensitive: "delete" or "deletecollection" as a method must not
		// pass for the verb.
		info.Verb = VerbUnknown
	}
	if info.Name == "" && (info.Verb == "list" || info.Verb == "watch" || info.Verb == "deletecollection") {
		q := r.URL.Query()
		info.FieldSelector, info.LabelSelector = q.Get("fieldSelector"), q.Get("labelSelector")
	}
	if info.Name == "" && (info.Verb == "list" || info.Verb == "watch") {
		if fs := info.FieldSelector; fs != "" {
			if sel, err := fields.ParseSelector(fs); err == nil {
				info.SelectorName, _ = sel.RequiresExactMatch("metadata.name")
			}
		}
	}
	return info
}

// lowerMethod is strings.ToLower(method), without allocating for the usual methods.
func lowerMethod(method string) string {
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	case http.MethodHead:
		return "head"
	case http.MethodOptions:
		return "options"
	}
	return strings.ToLower(method)
}

func isTrue(s string) bool { return s == "1" || strings.EqualFold(s, "true") }

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// SubresourcePath is the path a connect subresource (a proxy's) passes on: the segments
// after the subresource, with a leading slash and the request's trailing slash, as
// upstream's getRequestOptions makes it.
func (i *Info) SubresourcePath() string {
	p := ""
	if len(i.Parts) > 3 {
		p = strings.Join(i.Parts[3:], "/")
	}
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if strings.HasSuffix(i.Path, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}
