package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// aggregatedDiscovery is the media type of aggregated discovery.
const aggregatedDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// aggregatedList is the part of an aggregated discovery document (apidiscovery.k8s.io/v2)
// the collector reads. Decoding only this, rather than client-go's discovery structures
// (several copies of every resource), keeps a discovery of thousands of CRDs cheap.
type aggregatedList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Versions []struct {
			Version   string `json:"version"`
			Freshness string `json:"freshness"`
			Resources []struct {
				Resource     string `json:"resource"`
				ResponseKind *struct {
					Kind string `json:"kind"`
				} `json:"responseKind"`
				Scope string   `json:"scope"`
				Verbs []string `json:"verbs"`
			} `json:"resources"`
		} `json:"versions"`
	} `json:"items"`
}

// resourceList is the served resources of one group-version.
type resourceList struct {
	gv        schema.GroupVersion
	resources []metav1.APIResource
}

// preferredResources is client-go's ServerPreferredResources read from aggregated
// discovery: for every group resource, the most preferred version serving it (aggregated
// discovery lists a group's versions in preference order). Group-versions whose discovery
// is stale are returned in failed, without resources.
func (gc *GarbageCollector) preferredResources(ctx context.Context) ([]resourceList, map[schema.GroupVersion]bool, error) {
	var out []resourceList
	failed := map[schema.GroupVersion]bool{}
	for _, path := range []string{"/api", "/apis"} {
		var doc aggregatedList
		if err := gc.getAggregated(ctx, path, &doc); err != nil {
			return nil, nil, err
		}
		for _, g := range doc.Items {
			seen := map[string]bool{}
			for _, v := range g.Versions {
				gv := schema.GroupVersion{Group: g.Metadata.Name, Version: v.Version}
				if v.Freshness == "Stale" {
					failed[gv] = true
					continue
				}
				l := resourceList{gv: gv}
				for _, r := range v.Resources {
					if seen[r.Resource] || r.ResponseKind == nil {
						continue
					}
					seen[r.Resource] = true
					l.resources = append(l.resources, metav1.APIResource{
						Name: r.Resource, Kind: r.ResponseKind.Kind, Namespaced: r.Scope == "Namespaced", Verbs: r.Verbs,
					})
				}
				if len(l.resources) > 0 {
					out = append(out, l)
				}
			}
		}
	}
	return out, failed, nil
}

// getAggregated decodes the aggregated discovery document at path into doc.
func (gc *GarbageCollector) getAggregated(ctx context.Context, path string, doc *aggregatedList) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(gc.cfg.Host, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", aggregatedDiscovery)
	resp, err := gc.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || params["as"] != "APIGroupDiscoveryList" {
		return fmt.Errorf("GET %s: the server answered %q, not aggregated discovery", path, resp.Header.Get("Content-Type"))
	}
	return json.NewDecoder(resp.Body).Decode(doc)
}

// discoveryTags returns the ETags of the aggregated /api and /apis discovery documents
// (HEAD requests: no body). They change whenever a served resource does.
func (gc *GarbageCollector) discoveryTags(ctx context.Context) (string, error) {
	var tags []string
	for _, path := range []string{"/api", "/apis"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, strings.TrimSuffix(gc.cfg.Host, "/")+path, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Accept", aggregatedDiscovery)
		resp, err := gc.http.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		tag := resp.Header.Get("ETag")
		if resp.StatusCode != http.StatusOK || tag == "" {
			return "", fmt.Errorf("HEAD %s: %s, ETag %q", path, resp.Status, tag)
		}
		tags = append(tags, tag)
	}
	return strings.Join(tags, " "), nil
}
