package discovery

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"kubeos.dev/kube/internal/apiserver/rest"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/registry"
)

// Media type parameters of aggregated discovery.
const (
	aggregatedGroup = "apidiscovery.k8s.io"
	aggregatedAs    = "APIGroupDiscoveryList"
	versionV2       = "v2"
	versionV2beta1  = "v2beta1"
)

// subresourceVerbs are the verbs of the status and scale subresources.
var subresourceVerbs = []string{"get", "patch", "update"}

// Handler serves discovery. Safe for concurrent use.
type Handler struct {
	reg    *registry.Registry
	remote Remote // nil: no aggregation

	// snap is the encoded discovery of one registry generation.
	snap atomic.Pointer[snapshot]
	// build serialises rebuilds so that concurrent requests after a change encode once.
	build sync.Mutex
}

// New returns a discovery handler over reg.
func New(reg *registry.Registry) *Handler {
	return &Handler{reg: reg}
}

// document is one encoded response.
type document struct {
	body        []byte
	etag        string // quoted
	contentType string
}

func newDocument(v any, contentType string) *document {
	body, err := json.Marshal(v)
	if err != nil {
		// The values are built from plain strings and slices; failing to encode them is a
		// programming error.
		panic("discovery: encoding: " + err.Error())
	}
	sum := sha256.Sum256(body)
	return &document{body: body, etag: strconv.Quote(hex.EncodeToString(sum[:16])), contentType: contentType}
}

// snapshot is the discovery of one registry generation. Its documents are encoded on the
// first request for each and kept for the generation's life: with thousands of CRDs most of
// the per-group-version documents are never asked for (clients read the aggregated lists).
type snapshot struct {
	gen, remoteGen uint64
	groups         []*groupInfo // sorted by name, core ("") first
	byName         map[string]*groupInfo
	remote         []*remoteGroup // extension API servers' groups, in preference order
	remoteByName   map[string]*remoteGroup

	mu   sync.Mutex
	docs map[string]*document // by URL path, aggregated ones by path + " " + apidiscovery version
}

// current returns the snapshot for the registry's current generation, building it if the
// registry changed since the last one. Readers of an up-to-date snapshot take no lock.
func (h *Handler) current() *snapshot {
	gen, remoteGen := h.reg.Generation(), h.remoteGeneration()
	if s := h.snap.Load(); s != nil && s.gen == gen && s.remoteGen == remoteGen {
		return s
	}
	h.build.Lock()
	defer h.build.Unlock()
	gen, remoteGen = h.reg.Generation(), h.remoteGeneration()
	if s := h.snap.Load(); s != nil && s.gen == gen && s.remoteGen == remoteGen {
		return s
	}
	// The generation is read before the kinds: if the registry changes in between, the
	// snapshot holds newer kinds under an older generation and is rebuilt on the next
	// request, never the reverse.
	groups := groupsOf(h.reg.Kinds(), h.reg.GroupVersions())
	s := &snapshot{gen: gen, groups: groups, byName: make(map[string]*groupInfo, len(groups)), docs: map[string]*document{}}
	for _, g := range groups {
		s.byName[g.name] = g
	}
	s.remoteGen = remoteGen
	if h.remote != nil {
		s.remote = remoteGroupsOf(h.remote.Available(), s.byName)
		s.remoteByName = map[string]*remoteGroup{}
		for _, g := range s.remote {
			s.remoteByName[g.name] = g
		}
	}
	h.snap.Store(s)
	return s
}

func (h *Handler) remoteGeneration() uint64 {
	if h.remote == nil {
		return 0
	}
	return h.remote.Generation()
}

// document returns the document served at path (for /api and /apis with a non-empty
// aggregated version: the aggregated list in that apidiscovery version), nil if there is
// none.
func (s *snapshot) document(path, aggregatedVersion string) *document {
	key := path
	if aggregatedVersion != "" {
		key += " " + aggregatedVersion
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.docs[key]; ok {
		return d
	}
	d := s.build(path, aggregatedVersion)
	if d != nil {
		s.docs[key] = d
	}
	return d
}

// groupInfo is the kinds of one group, by version, versions in preference order.
type groupInfo struct {
	name     string
	versions []string
	kinds    map[string][]*registry.Kind
}

// groupsOf arranges kinds by group (sorted by name, core first) and version (in the
// registry's preference order).
func groupsOf(kinds []*registry.Kind, order map[string][]string) []*groupInfo {
	byName := map[string]*groupInfo{}
	var groups []*groupInfo
	for _, k := range kinds {
		g := byName[k.Group]
		if g == nil {
			g = &groupInfo{name: k.Group, kinds: map[string][]*registry.Kind{}}
			byName[k.Group] = g
			groups = append(groups, g)
		}
		g.kinds[k.Version] = append(g.kinds[k.Version], k)
	}
	for _, g := range groups {
		seen := map[string]bool{}
		for _, v := range order[g.name] {
			if len(g.kinds[v]) > 0 && !seen[v] {
				seen[v] = true
				g.versions = append(g.versions, v)
			}
		}
		// Versions the preference list missed (the registry changed between the two
		// calls) go last, in a stable order.
		var rest []string
		for v := range g.kinds {
			if !seen[v] {
				rest = append(rest, v)
			}
		}
		sort.Strings(rest)
		g.versions = append(g.versions, rest...)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	return groups
}

const jsonType = "application/json"

// build encodes the document at path (see document).
func (s *snapshot) build(path, aggregatedVersion string) *document {
	if aggregatedVersion != "" {
		var items []apidiscoveryv2.APIGroupDiscovery
		for _, g := range s.groups {
			if (path == "/api") == (g.name == "") {
				items = append(items, aggregatedGroupOf(g))
			}
		}
		if path == "/apis" {
			for _, g := range s.remote {
				items = append(items, g.aggregated())
			}
		}
		return aggregatedDocument(items, aggregatedVersion)
	}
	switch {
	case path == "/api":
		apiVersions := &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{},
		}
		if core := s.byName[""]; core != nil {
			apiVersions.Versions = append(apiVersions.Versions, core.versions...)
		}
		return newDocument(apiVersions, jsonType)
	case path == "/apis":
		groupList := &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{},
		}
		for _, g := range s.groups {
			if g.name != "" {
				groupList.Groups = append(groupList.Groups, apiGroupOf(g))
			}
		}
		for _, g := range s.remote {
			groupList.Groups = append(groupList.Groups, g.apiGroup())
		}
		return newDocument(groupList, jsonType)
	case strings.HasPrefix(path, "/api/"):
		v := strings.TrimPrefix(path, "/api/")
		if core := s.byName[""]; core != nil && len(core.kinds[v]) > 0 {
			return newDocument(resourceList(v, core.kinds[v]), jsonType)
		}
	case strings.HasPrefix(path, "/apis/"):
		group, version, hasVersion := strings.Cut(strings.TrimPrefix(path, "/apis/"), "/")
		if rg := s.remoteByName[group]; rg != nil && !hasVersion {
			one := rg.apiGroup()
			one.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			return newDocument(&one, jsonType)
		}
		g := s.byName[group]
		if g == nil || group == "" {
			return nil
		}
		if !hasVersion {
			one := apiGroupOf(g)
			one.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			return newDocument(&one, jsonType)
		}
		if len(g.kinds[version]) > 0 && !strings.Contains(version, "/") {
			return newDocument(resourceList(group+"/"+version, g.kinds[version]), jsonType)
		}
	}
	return nil
}

// apiGroupOf is the legacy discovery of a group: its versions, the first preferred.
func apiGroupOf(g *groupInfo) metav1.APIGroup {
	apiGroup := metav1.APIGroup{Name: g.name}
	for _, v := range g.versions {
		apiGroup.Versions = append(apiGroup.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: g.name + "/" + v, Version: v,
		})
	}
	apiGroup.PreferredVersion = apiGroup.Versions[0]
	return apiGroup
}

// aggregatedGroupOf is the aggregated discovery of a group, versions in preference order.
func aggregatedGroupOf(g *groupInfo) apidiscoveryv2.APIGroupDiscovery {
	agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
	for _, v := range g.versions {
		agg.Versions = append(agg.Versions, aggregatedVersion(v, g.kinds[v]))
	}
	return agg
}

func resourceList(gv string, kinds []*registry.Kind) *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv,
		APIResources: make([]metav1.APIResource, 0, len(kinds)),
	}
	for _, k := range kinds {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name:               k.Resource,
			SingularName:       k.Singular,
			Namespaced:         k.Namespaced,
			Kind:               k.Kind,
			Verbs:              metav1.Verbs(k.VerbList()),
			ShortNames:         k.ShortNames,
			Categories:         k.Categories,
			StorageVersionHash: storageVersionHash(k.Group, k.Version, k.Kind),
		})
		if k.Status {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name:       k.Resource + "/status",
				Namespaced: k.Namespaced,
				Kind:       k.Kind,
				Verbs:      metav1.Verbs(subresourceVerbs),
			})
		}
		if k.Scale != nil {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name:       k.Resource + "/scale",
				Namespaced: k.Namespaced,
				Group:      "autoscaling",
				Version:    "v1",
				Kind:       "Scale",
				Verbs:      metav1.Verbs(subresourceVerbs),
			})
		}
		for _, sr := range k.ExtraSubresources() {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: k.Resource + "/" + sr.Name, Namespaced: k.Namespaced,
				Group: sr.Group, Version: sr.Version, Kind: sr.Kind, Verbs: metav1.Verbs(sr.Verbs),
			})
		}
	}
	return list
}

func aggregatedVersion(version string, kinds []*registry.Kind) apidiscoveryv2.APIVersionDiscovery {
	out := apidiscoveryv2.APIVersionDiscovery{
		Version:   version,
		Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: make([]apidiscoveryv2.APIResourceDiscovery, 0, len(kinds)),
	}
	for _, k := range kinds {
		scope := apidiscoveryv2.ScopeCluster
		if k.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		gvk := &metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
		r := apidiscoveryv2.APIResourceDiscovery{
			Resource:         k.Resource,
			ResponseKind:     gvk,
			Scope:            scope,
			SingularResource: k.Singular,
			Verbs:            k.VerbList(),
			ShortNames:       k.ShortNames,
			Categories:       k.Categories,
		}
		if k.Status {
			r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: "status", ResponseKind: gvk, Verbs: subresourceVerbs,
			})
		}
		if k.Scale != nil {
			r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource:  "scale",
				ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
				Verbs:        subresourceVerbs,
			})
		}
		for _, sr := range k.ExtraSubresources() {
			rk := &metav1.GroupVersionKind{Group: sr.Group, Version: sr.Version, Kind: sr.Kind}
			if sr.Version == "" {
				rk = gvk
			}
			r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sr.Name, ResponseKind: rk, Verbs: sr.Verbs})
		}
		out.Resources = append(out.Resources, r)
	}
	return out
}

// aggregatedDocument encodes one aggregated list in the apidiscovery version asked for.
func aggregatedDocument(items []apidiscoveryv2.APIGroupDiscovery, version string) *document {
	if items == nil {
		items = []apidiscoveryv2.APIGroupDiscovery{}
	}
	v2 := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: aggregatedAs, APIVersion: apidiscoveryv2.SchemeGroupVersion.String()},
		Items:    items,
	}
	if version == versionV2beta1 {
		return newDocument(toV2beta1(v2), aggregatedContentType(versionV2beta1))
	}
	return newDocument(v2, aggregatedContentType(versionV2))
}

func aggregatedContentType(version string) string {
	return "application/json;g=" + aggregatedGroup + ";v=" + version + ";as=" + aggregatedAs
}

// toV2beta1 converts an aggregated list to v2beta1, which has the same shape.
func toV2beta1(in *apidiscoveryv2.APIGroupDiscoveryList) *apidiscoveryv2beta1.APIGroupDiscoveryList {
	out := &apidiscoveryv2beta1.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: aggregatedAs, APIVersion: apidiscoveryv2beta1.SchemeGroupVersion.String()},
		Items:    make([]apidiscoveryv2beta1.APIGroupDiscovery, 0, len(in.Items)),
	}
	for _, g := range in.Items {
		og := apidiscoveryv2beta1.APIGroupDiscovery{ObjectMeta: g.ObjectMeta}
		for _, v := range g.Versions {
			ov := apidiscoveryv2beta1.APIVersionDiscovery{
				Version:   v.Version,
				Freshness: apidiscoveryv2beta1.DiscoveryFreshness(v.Freshness),
				Resources: make([]apidiscoveryv2beta1.APIResourceDiscovery, 0, len(v.Resources)),
			}
			for _, r := range v.Resources {
				or := apidiscoveryv2beta1.APIResourceDiscovery{
					Resource:         r.Resource,
					ResponseKind:     r.ResponseKind,
					Scope:            apidiscoveryv2beta1.ResourceScope(r.Scope),
					SingularResource: r.SingularResource,
					Verbs:            r.Verbs,
					ShortNames:       r.ShortNames,
					Categories:       r.Categories,
				}
				for _, sr := range r.Subresources {
					or.Subresources = append(or.Subresources, apidiscoveryv2beta1.APISubresourceDiscovery{
						Subresource:   sr.Subresource,
						ResponseKind:  sr.ResponseKind,
						AcceptedTypes: sr.AcceptedTypes,
						Verbs:         sr.Verbs,
					})
				}
				ov.Resources = append(ov.Resources, or)
			}
			og.Versions = append(og.Versions, ov)
		}
		out.Items = append(out.Items, og)
	}
	return out
}

// storageVersionHash is kube-apiserver's hash of the storage version of a kind.
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// ServeHTTP answers GET and HEAD on /api, /api/<v>, /apis, /apis/<g> and /apis/<g>/<v>.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the server does not allow this method on the requested resource")
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	s := h.current()

	var doc *document
	if path == "/api" || path == "/apis" {
		if v := aggregatedVersionAccepted(r.Header.Get("Accept")); v != "" {
			doc = s.document(path, v)
		}
		// The body depends on Accept: caches must key on it.
		w.Header().Add("Vary", "Accept")
	}
	if doc == nil {
		doc = s.document(path, "")
	}
	if doc == nil {
		// A group or version nobody serves: kube-apiserver's not-found handler answers
		// plain text.
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", doc.contentType)
	hdr.Set("ETag", doc.etag)
	if etagMatches(r.Header.Get("If-None-Match"), doc.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr.Set("Content-Length", strconv.Itoa(len(doc.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(doc.body)
	}
}

// aggregatedVersionAccepted returns the apidiscovery version of the first Accept clause
// asking for an aggregated list ("" if none does). Clauses are tried in the order sent; the
// clients list the variant they prefer first.
func aggregatedVersionAccepted(accept string) string {
	if accept == "" {
		return ""
	}
	for _, clause := range strings.Split(accept, ",") {
		base, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil || base != "application/json" {
			continue
		}
		if params["g"] != aggregatedGroup || params["as"] != aggregatedAs {
			continue
		}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
				continue
			}
		}
		switch params["v"] {
		case versionV2, versionV2beta1:
			return params["v"]
		}
	}
	return ""
}

// etagMatches implements the weak comparison of If-None-Match.
func etagMatches(ifNoneMatch, etag string) bool {
	if ifNoneMatch == "" {
		return false
	}
	for _, candidate := range strings.Split(ifNoneMatch, ",") {
		candidate = strings.TrimPrefix(strings.TrimSpace(candidate), "W/")
		if candidate == "*" || candidate == etag {
			return true
		}
	}
	return false
}

// writeStatus answers with an API error through the REST handler's one Status writer.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	rest.WriteStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Message: message, Reason: reason, Details: &metav1.StatusDetails{}, Code: int32(code),
	}})
}
