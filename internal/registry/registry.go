package registry

import (
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Registry holds the kinds the API serves. Safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	byGVR map[schema.GroupVersionResource]*Kind
	// byGV counts the resources of each served group-version.
	byGV map[schema.GroupVersion]int
	// generation moves on every change so that discovery and OpenAPI can cache their output.
	generation uint64
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{byGVR: map[schema.GroupVersionResource]*Kind{}, byGV: map[schema.GroupVersion]int{}}
}

// Add registers (or replaces) a kind.
func (r *Registry) Add(k *Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byGVR[k.GVR()]; !ok {
		r.byGV[k.GVR().GroupVersion()]++
	}
	r.byGVR[k.GVR()] = k
	r.generation++
}

// Remove unregisters a resource.
func (r *Registry) Remove(gvr schema.GroupVersionResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byGVR[gvr]; ok {
		delete(r.byGVR, gvr)
		if r.byGV[gvr.GroupVersion()]--; r.byGV[gvr.GroupVersion()] <= 0 {
			delete(r.byGV, gvr.GroupVersion())
		}
		r.generation++
	}
}

// Lookup finds the kind serving a resource.
func (r *Registry) Lookup(gvr schema.GroupVersionResource) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.byGVR[gvr]
	return k, ok
}

// ServesGroupVersion says whether any resource of a group-version is served.
func (r *Registry) ServesGroupVersion(gv schema.GroupVersion) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byGV[gv] > 0
}

// Generation changes whenever a kind is added or removed.
func (r *Registry) Generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.generation
}

// Kinds returns every kind, sorted by group, version and resource.
func (r *Registry) Kinds() []*Kind {
	r.mu.RLock()
	out := make([]*Kind, 0, len(r.byGVR))
	for _, k := range r.byGVR {
		out = append(out, k)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return versionLess(a.Version, b.Version)
		}
		return a.Resource < b.Resource
	})
	return out
}

// GroupVersions returns the served versions of each group, the preferred version first.
func (r *Registry) GroupVersions() map[string][]string {
	seen := map[string]map[string]bool{}
	for _, k := range r.Kinds() {
		if seen[k.Group] == nil {
			seen[k.Group] = map[string]bool{}
		}
		seen[k.Group][k.Version] = true
	}
	out := map[string][]string{}
	for g, vs := range seen {
		for v := range vs {
			out[g] = append(out[g], v)
		}
		sort.Slice(out[g], func(i, j int) bool { return versionLess(out[g][i], out[g][j]) })
	}
	return out
}

// versionLess orders Kubernetes versions by priority: GA before beta before alpha, higher
// numbers first (v2 < v1 < v1beta2 < v1beta1 < v1alpha1 in this order), as kube-apiserver does.
func versionLess(a, b string) bool {
	pa, pb := versionPriority(a), versionPriority(b)
	if pa != pb {
		return pa.less(pb)
	}
	return a < b
}

type vprio struct {
	valid bool
	major int
	stage int // 2 GA, 1 beta, 0 alpha
	minor int
}

func (a vprio) less(b vprio) bool {
	if a.valid != b.valid {
		return a.valid
	}
	if a.stage != b.stage {
		return a.stage > b.stage
	}
	if a.major != b.major {
		return a.major > b.major
	}
	return a.minor > b.minor
}

func versionPriority(v string) vprio {
	if !strings.HasPrefix(v, "v") {
		return vprio{}
	}
	rest := v[1:]
	major, rest := leadingInt(rest)
	if major < 0 {
		return vprio{}
	}
	switch {
	case rest == "":
		return vprio{valid: true, major: major, stage: 2}
	case strings.HasPrefix(rest, "beta"):
		m, tail := leadingInt(rest[4:])
		if m >= 0 && tail == "" {
			return vprio{valid: true, major: major, stage: 1, minor: m}
		}
	case strings.HasPrefix(rest, "alpha"):
		m, tail := leadingInt(rest[5:])
		if m >= 0 && tail == "" {
			return vprio{valid: true, major: major, stage: 0, minor: m}
		}
	}
	return vprio{}
}

func leadingInt(s string) (int, string) {
	n, i := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		i++
	}
	if i == 0 {
		return -1, s
	}
	return n, s[i:]
}
