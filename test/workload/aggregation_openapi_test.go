package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kubeos.dev/kube/internal/server/servertest"
)

// openAPIGet GETs path (JSON) with cfg's client and decodes the answer into out.
func openAPIGet(ctx context.Context, cfg *rest.Config, path string, out any) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return json.Unmarshal(body, out)
}

// openAPIDoc is the part of a v2 or v3 document the test looks at.
type openAPIDoc struct {
	Paths       map[string]json.RawMessage `json:"paths"`
	Definitions map[string]openAPISchema   `json:"definitions"`
	Components  struct {
		Schemas map[string]openAPISchema `json:"schemas"`
	} `json:"components"`
}

type openAPISchema struct {
	GVK []struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
}

// kindDefinition names the definition with group-version-kind wardle.example.com/v1alpha1
// Flunder, "" when there is none.
func kindDefinition(defs map[string]openAPISchema, version, kind string) string {
	for name, d := range defs {
		for _, g := range d.GVK {
			if g.Group == "wardle.example.com" && g.Version == version && g.Kind == kind {
				return name
			}
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestAggregationOpenAPI (issue 21, item 5): once sample-apiserver's APIService
// v1alpha1.wardle.example.com is Available, Kube's /openapi/v2 holds its paths and
// definitions (those of v1alpha1 only: v1beta1 has no APIService here), /openapi/v3 lists
// apis/wardle.example.com/v1alpha1 with the extension server's own document, and kubectl
// 1.33 (v3) and 1.27 (v2) explain flunders; when the APIService goes, so does all of it.
func TestAggregationOpenAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sample := startSampleAPIServer(t, ctx, "wardle-openapi")
	sample.register(t, ctx, "v1alpha1")
	cfg := adminConfig(t)

	const listPath = "/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"
	servertest.Eventually(t, 60*time.Second, 500*time.Millisecond, func() error {
		var v2 openAPIDoc
		if err := openAPIGet(ctx, cfg, "/openapi/v2", &v2); err != nil {
			return err
		}
		if kindDefinition(v2.Definitions, "v1alpha1", "Flunder") == "" || kindDefinition(v2.Definitions, "v1alpha1", "Fischer") == "" {
			return fmt.Errorf("/openapi/v2 has no Flunder and Fischer definitions of wardle.example.com/v1alpha1")
		}
		if _, ok := v2.Paths[listPath]; !ok {
			return fmt.Errorf("/openapi/v2 lacks %s", listPath)
		}
		return nil
	})
	var v2 openAPIDoc
	if err := openAPIGet(ctx, cfg, "/openapi/v2", &v2); err != nil {
		t.Fatal(err)
	}
	for p := range v2.Paths {
		if strings.HasPrefix(p, "/apis/wardle.example.com/v1beta1") {
			t.Errorf("/openapi/v2 has %s, of a group-version without an APIService", p)
		}
	}
	if _, ok := v2.Paths["/api/v1/namespaces/{namespace}/configmaps"]; !ok {
		t.Error("/openapi/v2 lost Kube's own paths")
	}

	// v3: the index lists the group-version; its document is the extension server's.
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := openAPIGet(ctx, cfg, "/openapi/v3", &index); err != nil {
		t.Fatal(err)
	}
	entry, ok := index.Paths["apis/wardle.example.com/v1alpha1"]
	if !ok || index.Paths["api/v1"].ServerRelativeURL == "" {
		t.Fatalf("/openapi/v3 index: %v", sortedKeys(index.Paths))
	}
	if _, ok := index.Paths["apis/wardle.example.com/v1beta1"]; ok {
		t.Error("/openapi/v3 lists wardle.example.com/v1beta1, which has no APIService")
	}
	var viaKube, direct openAPIDoc
	if err := openAPIGet(ctx, cfg, entry.ServerRelativeURL, &viaKube); err != nil {
		t.Fatal(err)
	}
	if err := openAPIGet(ctx, sample.directConfig(t), "/openapi/v3/apis/wardle.example.com/v1alpha1", &direct); err != nil {
		t.Fatal(err)
	}
	if kindDefinition(viaKube.Components.Schemas, "v1alpha1", "Flunder") == "" {
		t.Errorf("v3 document has no Flunder schema: %v", sortedKeys(viaKube.Components.Schemas))
	}
	if got, want := sortedKeys(viaKube.Components.Schemas), sortedKeys(direct.Components.Schemas); !slices.Equal(got, want) {
		t.Errorf("v3 schemas through Kube\n %v\nfrom sample-apiserver\n %v", got, want)
	}
	if got, want := sortedKeys(viaKube.Paths), sortedKeys(direct.Paths); !slices.Equal(got, want) {
		t.Errorf("v3 paths through Kube\n %v\nfrom sample-apiserver\n %v", got, want)
	}

	// kubectl explain: 1.33 reads v3; 1.27 needs v2 (and renders from v3), and its
	// plaintext-openapiv2 output renders from v2 alone.
	for _, c := range []struct {
		version string
		args    []string
	}{
		{"1.33", nil},
		{"1.27", nil},
		{"1.27", []string{"--output=plaintext-openapiv2"}},
	} {
		k := newKubectl(t, c.version)
		out := k.ok("", append([]string{"explain", "flunders"}, c.args...)...)
		contains(t, "kubectl "+c.version+" explain flunders", out, "Flunder", "wardle.example.com", "spec")
		out = k.ok("", append([]string{"explain", "flunders.spec"}, c.args...)...)
		contains(t, "kubectl "+c.version+" explain flunders.spec", out, "reference", "referenceType")
	}

	// The APIService deleted: its paths, definitions and v3 document go.
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := agg.ApiregistrationV1().APIServices().Delete(ctx, "v1alpha1.wardle.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 500*time.Millisecond, func() error {
		var v2 openAPIDoc
		if err := openAPIGet(ctx, cfg, "/openapi/v2", &v2); err != nil {
			return err
		}
		if name := kindDefinition(v2.Definitions, "v1alpha1", "Flunder"); name != "" {
			return fmt.Errorf("/openapi/v2 still has %s", name)
		}
		if _, ok := v2.Paths[listPath]; ok {
			return fmt.Errorf("/openapi/v2 still has %s", listPath)
		}
		var index struct {
			Paths map[string]json.RawMessage `json:"paths"`
		}
		if err := openAPIGet(ctx, cfg, "/openapi/v3", &index); err != nil {
			return err
		}
		if _, ok := index.Paths["apis/wardle.example.com/v1alpha1"]; ok {
			return fmt.Errorf("/openapi/v3 still lists apis/wardle.example.com/v1alpha1")
		}
		return nil
	})
	var gone map[string]any
	if err := openAPIGet(ctx, cfg, "/openapi/v3/apis/wardle.example.com/v1alpha1", &gone); err == nil || !strings.Contains(err.Error(), ": 404 ") {
		t.Errorf("GET the removed group-version's v3 document: %v", err)
	}
}
