package discovery

import (
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RemoteVersion is a group-version an extension API server serves, with the resources its
// own discovery lists.
type RemoteVersion struct {
	GroupVersion schema.GroupVersion
	Resources    []metav1.APIResource
}

// Remote is the aggregator's view of the extension API servers: the available remote
// group-versions in preference order (most preferred group first, then its versions), and
// a generation that changes when they do.
type Remote interface {
	Generation() uint64
	Available() []RemoteVersion
}

// SetRemote makes discovery list the group-versions of r beside the local ones.
func (h *Handler) SetRemote(r Remote) { h.remote = r }

// remoteGroup is one remote group, versions in preference order.
type remoteGroup struct {
	name      string
	versions  []string
	resources map[string][]metav1.APIResource
}

// remoteGroupsOf groups remote versions; a group Kube serves locally is left out (the local
// one wins, as an APIService cannot take over a local group-version here).
func remoteGroupsOf(vs []RemoteVersion, local map[string]*groupInfo) []*remoteGroup {
	var out []*remoteGroup
	byName := map[string]*remoteGroup{}
	for _, v := range vs {
		if _, ok := local[v.GroupVersion.Group]; ok || v.GroupVersion.Group == "" {
			continue
		}
		g := byName[v.GroupVersion.Group]
		if g == nil {
			g = &remoteGroup{name: v.GroupVersion.Group, resources: map[string][]metav1.APIResource{}}
			byName[g.name] = g
			out = append(out, g)
		}
		g.versions = append(g.versions, v.GroupVersion.Version)
		g.resources[v.GroupVersion.Version] = v.Resources
	}
	return out
}

func (g *remoteGroup) apiGroup() metav1.APIGroup {
	apiGroup := metav1.APIGroup{Name: g.name}
	for _, v := range g.versions {
		apiGroup.Versions = append(apiGroup.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
	}
	apiGroup.PreferredVersion = apiGroup.Versions[0]
	return apiGroup
}

// aggregated is the group's aggregated discovery, converted from the extension server's
// resource lists (subresources are the entries named resource/subresource).
func (g *remoteGroup) aggregated() apidiscoveryv2.APIGroupDiscovery {
	agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
	for _, v := range g.versions {
		out := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
			Resources: []apidiscoveryv2.APIResourceDiscovery{}}
		index := map[string]int{}
		for _, r := range g.resources[v] {
			if strings.Contains(r.Name, "/") {
				continue
			}
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			index[r.Name] = len(out.Resources)
			out.Resources = append(out.Resources, apidiscoveryv2.APIResourceDiscovery{
				Resource: r.Name, Scope: scope, SingularResource: r.SingularName, Verbs: r.Verbs,
				ShortNames: r.ShortNames, Categories: r.Categories,
				ResponseKind: &metav1.GroupVersionKind{Group: g.name, Version: v, Kind: r.Kind},
			})
		}
		for _, r := range g.resources[v] {
			parent, sub, ok := strings.Cut(r.Name, "/")
			i, found := index[parent]
			if !ok || !found {
				continue
			}
			group, version := r.Group, r.Version
			if group == "" && version == "" {
				group, version = g.name, v
			}
			out.Resources[i].Subresources = append(out.Resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: sub, Verbs: r.Verbs, ResponseKind: &metav1.GroupVersionKind{Group: group, Version: version, Kind: r.Kind}})
		}
		agg.Versions = append(agg.Versions, out)
	}
	return agg
}
