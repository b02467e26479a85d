package discovery

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/registry"
)

func testKinds() []*registry.Kind {
	return []*registry.Kind{
		{
			Version: "v1", Kind: "ConfigMap", ListKind: "ConfigMapList",
			Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true,
		},
		{
			Version: "v1", Kind: "Namespace", ListKind: "NamespaceList",
			Resource: "namespaces", Singular: "namespace", ShortNames: []string{"ns"}, Status: true,
			Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		},
		{
			Group: "apps", Version: "v1", Kind: "Deployment", ListKind: "DeploymentList",
			Resource: "deployments", Singular: "deployment", ShortNames: []string{"deploy"},
			Categories: []string{"all"}, Namespaced: true, Status: true,
			Scale: &registry.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
		},
		{
			Group: "example.com", Version: "v1", Kind: "Widget", ListKind: "WidgetList",
			Resource: "widgets", Singular: "widget", ShortNames: []string{"wd"}, Namespaced: true, Status: true,
		},
		{
			Group: "example.com", Version: "v1beta1", Kind: "Widget", ListKind: "WidgetList",
			Resource: "widgets", Singular: "widget", Namespaced: true,
		},
	}
}

func newRegistry(kinds ...*registry.Kind) *registry.Registry {
	reg := registry.New()
	for _, k := range kinds {
		reg.Add(k)
	}
	return reg
}

func newClient(t *testing.T, srv *httptest.Server, legacy bool) *discovery.DiscoveryClient {
	t.Helper()
	cfg := &rest.Config{Host: srv.URL}
	if srv.TLS != nil {
		cfg.TLSClientConfig.Insecure = true
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc.UseLegacyDiscovery = legacy
	return dc
}

// resources flattens discovery output to "group/version resource kind" strings.
func resources(lists []*metav1.APIResourceList) []string {
	var out []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			kind := r.Kind
			// The aggregated form fills in the group and version of every resource; the
			// legacy form only where they differ from the list's.
			gv := schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
			if r.Version != "" && gv != l.GroupVersion {
				kind = r.Group + "/" + r.Version + "." + r.Kind
			}
			out = append(out, fmt.Sprintf("%s %s %s ns=%v short=%v verbs=%v", l.GroupVersion, r.Name, kind, r.Namespaced, r.ShortNames, len(r.Verbs)))
		}
	}
	slices.Sort(out)
	return out
}

func TestClientGoDiscovery(t *testing.T) {
	want := []string{
		"apps/v1 deployments Deployment ns=true short=[deploy] verbs=8",
		"apps/v1 deployments/scale autoscaling/v1.Scale ns=true short=[] verbs=3",
		"apps/v1 deployments/status Deployment ns=true short=[] verbs=3",
		"example.com/v1 widgets Widget ns=true short=[wd] verbs=8",
		"example.com/v1 widgets/status Widget ns=true short=[] verbs=3",
		"example.com/v1beta1 widgets Widget ns=true short=[] verbs=8",
		"v1 configmaps ConfigMap ns=true short=[cm] verbs=8",
		"v1 namespaces Namespace ns=false short=[ns] verbs=7",
		"v1 namespaces/status Namespace ns=false short=[] verbs=3",
	}
	for _, tc := range []struct {
		name   string
		legacy bool
		tls    bool
	}{
		{"aggregated", false, false},
		{"legacy", true, false},
		{"aggregated-tls", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(newRegistry(testKinds()...))
			var srv *httptest.Server
			if tc.tls {
				srv = httptest.NewTLSServer(h)
			} else {
				srv = httptest.NewServer(h)
			}
			defer srv.Close()
			dc := newClient(t, srv, tc.legacy)
			groups, lists, err := dc.ServerGroupsAndResources()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, g := range groups {
				names = append(names, g.Name+"="+g.PreferredVersion.Version)
			}
			if got, want := fmt.Sprint(names), "[=v1 apps=v1 example.com=v1]"; got != want {
				t.Errorf("groups = %s, want %s", got, want)
			}
			got := resources(lists)
			// The aggregated form does not carry short names of subresources either; both
			// forms must give the same view.
			if !slices.Equal(got, want) {
				t.Errorf("resources:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func get(t *testing.T, h http.Handler, path, accept, ifNoneMatch string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

const (
	acceptK33 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	acceptK27 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)

func TestContentTypes(t *testing.T) {
	h := New(newRegistry(testKinds()...))
	for _, tc := range []struct {
		path, accept, contentType, apiVersion, kind string
		code                                        int
	}{
		{"/api", "", "application/json", "", "APIVersions", 200},
		{"/api", acceptK33, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList", 200},
		{"/apis", acceptK27, "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", "apidiscovery.k8s.io/v2beta1", "APIGroupDiscoveryList", 200},
		{"/apis/", "application/json;profile=nopeer;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList", 200},
		{"/apis", "application/json, */*", "application/json", "v1", "APIGroupList", 200},
		{"/apis/apps", "application/json, */*", "application/json", "v1", "APIGroup", 200},
		{"/apis/apps/v1", acceptK33, "application/json", "v1", "APIResourceList", 200},
		{"/api/v1", "", "application/json", "v1", "APIResourceList", 200},
		{"/api/v2", "", "text/plain; charset=utf-8", "", "", 404},
		{"/apis/nope", "", "text/plain; charset=utf-8", "", "", 404},
		{"/apis/apps/v2", "", "text/plain; charset=utf-8", "", "", 404},
		{"/apis/apps/v1/deployments", "", "text/plain; charset=utf-8", "", "", 404},
	} {
		resp := get(t, h, tc.path, tc.accept, "")
		body, _ := io.ReadAll(resp.Body)
		if tc.code == http.StatusNotFound {
			// Unserved paths: kube-apiserver's not-found handler, plain text.
			if resp.StatusCode != tc.code || resp.Header.Get("Content-Type") != tc.contentType || string(body) != "404 page not found\n" {
				t.Errorf("GET %s: %d %q %q, want 404 plain text", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(body, &tm); err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if resp.StatusCode != tc.code || resp.Header.Get("Content-Type") != tc.contentType ||
			tm.APIVersion != tc.apiVersion || tm.Kind != tc.kind {
			t.Errorf("GET %s Accept %q: %d %q %s/%s, want %d %q %s/%s", tc.path, tc.accept,
				resp.StatusCode, resp.Header.Get("Content-Type"), tm.APIVersion, tm.Kind,
				tc.code, tc.contentType, tc.apiVersion, tc.kind)
		}
	}

	// The core group is the one item of aggregated /api.
	resp := get(t, h, "/api", acceptK33, "")
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "" || list.Items[0].Versions[0].Version != "v1" {
		t.Errorf("aggregated /api = %+v", list.Items)
	}

	// Method other than GET.
	req := httptest.NewRequest(http.MethodPost, "/apis", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("POST /apis: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}

func TestETagAndChange(t *testing.T) {
	reg := newRegistry(testKinds()...)
	h := New(reg)
	for _, accept := range []string{acceptK33, acceptK27, ""} {
		first := get(t, h, "/apis", accept, "")
		etag := first.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("Accept %q: no ETag", accept)
		}
		again := get(t, h, "/apis", accept, etag)
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("Accept %q: If-None-Match %s gave %d", accept, etag, again.StatusCode)
		}
	}
	v2tag := get(t, h, "/apis", acceptK33, "").Header.Get("ETag")
	v2b1tag := get(t, h, "/apis", acceptK27, "").Header.Get("ETag")
	if v2tag == v2b1tag {
		t.Errorf("v2 and v2beta1 share ETag %s", v2tag)
	}

	// A new CRD is visible on the next request, and the ETag moves.
	reg.Add(&registry.Kind{
		Group: "stable.example.org", Version: "v1", Kind: "Gadget", ListKind: "GadgetList",
		Resource: "gadgets", Singular: "gadget",
	})
	resp := get(t, h, "/apis", acceptK33, v2tag)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == v2tag {
		t.Fatalf("after change: %d etag %s", resp.StatusCode, resp.Header.Get("ETag"))
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Items, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == "stable.example.org" }) {
		t.Errorf("new group missing from %+v", list.Items)
	}
	if got := get(t, h, "/apis/stable.example.org/v1", "", ""); got.StatusCode != http.StatusOK {
		t.Errorf("new group version: %d", got.StatusCode)
	}

	// And removal too.
	reg.Remove(schema.GroupVersionResource{Group: "stable.example.org", Version: "v1", Resource: "gadgets"})
	if got := get(t, h, "/apis/stable.example.org/v1", "", ""); got.StatusCode != http.StatusNotFound {
		t.Errorf("removed group version: %d", got.StatusCode)
	}
}

func TestPreferredVersion(t *testing.T) {
	h := New(newRegistry(testKinds()...))
	resp := get(t, h, "/apis/example.com", "", "")
	var g metav1.APIGroup
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	if g.PreferredVersion.Version != "v1" || len(g.Versions) != 2 || g.Versions[1].Version != "v1beta1" {
		t.Errorf("APIGroup = %+v", g)
	}
}

func TestAcceptParsing(t *testing.T) {
	for accept, want := range map[string]string{
		"":                 "",
		"application/json": "",
		acceptK33:          "v2",
		acceptK27:          "v2beta1",
		"application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io":            "v2",
		"application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList":            "",
		"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0":        "",
		"application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList":            "",
		"garbage;;;,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList": "v2",
	} {
		if got := aggregatedVersionAccepted(accept); got != want {
			t.Errorf("aggregatedVersionAccepted(%q) = %q, want %q", accept, got, want)
		}
	}
}

// syntheticKinds returns n CRD-like kinds spread over n/10 groups.
func syntheticKinds(n int) []*registry.Kind {
	out := make([]*registry.Kind, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, &registry.Kind{
			Group: fmt.Sprintf("g%d.example.com", i/10), Version: "v1",
			Kind: fmt.Sprintf("Thing%d", i), ListKind: fmt.Sprintf("Thing%dList", i),
			Resource: fmt.Sprintf("things%d", i), Singular: fmt.Sprintf("thing%d", i),
			ShortNames: []string{fmt.Sprintf("t%d", i)}, Categories: []string{"all"},
			Namespaced: true, Status: true,
		})
	}
	return out
}

// BenchmarkBuild5000 measures the first aggregated /apis request after a registry change
// with 5,000 kinds: the snapshot and the encoding of the document.
func BenchmarkBuild5000(b *testing.B) {
	reg := newRegistry(syntheticKinds(5000)...)
	h := New(reg)
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", acceptK33)
	b.ReportAllocs()
	for b.Loop() {
		h.snap.Store(nil)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// BenchmarkServeAggregated5000 measures a cached aggregated /apis request.
func BenchmarkServeAggregated5000(b *testing.B) {
	h := New(newRegistry(syntheticKinds(5000)...))
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", acceptK33)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
	}
}

// TestConcurrentChange reads discovery while the registry changes (run with -race).
func TestConcurrentChange(t *testing.T) {
	reg := newRegistry(testKinds()...)
	h := New(reg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			k := syntheticKinds(1)[0]
			reg.Add(k)
			reg.Remove(k.GVR())
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		if resp := get(t, h, "/apis", acceptK33, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /apis: %d", resp.StatusCode)
		}
	}
}

type fakeRemote struct {
	gen uint64
	vs  []RemoteVersion
}

func (f *fakeRemote) Generation() uint64         { return f.gen }
func (f *fakeRemote) Available() []RemoteVersion { return f.vs }

// TestRemoteGroups: an extension server's group-versions appear in the group list, the
// group document and aggregated discovery (subresources folded into their resource); a
// remote group that Kube serves itself is left out; a new generation rebuilds.
func TestRemoteGroups(t *testing.T) {
	local := map[string]*groupInfo{"apps": {name: "apps"}}
	wardle := schema.GroupVersion{Group: "wardle.example.com", Version: "v1beta1"}
	vs := []RemoteVersion{
		{GroupVersion: wardle, Resources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "list"}},
			{Name: "flunders/status", Kind: "Flunder", Verbs: []string{"get", "update"}}}},
		{GroupVersion: schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}, Resources: []metav1.APIResource{{Name: "fischers", Kind: "Fischer", Verbs: []string{"list"}}}},
		{GroupVersion: schema.GroupVersion{Group: "apps", Version: "v9"}},
	}
	groups := remoteGroupsOf(vs, local)
	if len(groups) != 1 || groups[0].name != "wardle.example.com" || !slices.Equal(groups[0].versions, []string{"v1beta1", "v1alpha1"}) {
		t.Fatalf("groups %+v", groups)
	}
	g := groups[0].apiGroup()
	if g.PreferredVersion.GroupVersion != "wardle.example.com/v1beta1" || len(g.Versions) != 2 {
		t.Errorf("APIGroup %+v", g)
	}
	agg := groups[0].aggregated()
	if len(agg.Versions) != 2 || len(agg.Versions[0].Resources) != 1 {
		t.Fatalf("aggregated %+v", agg)
	}
	r := agg.Versions[0].Resources[0]
	if r.Resource != "flunders" || r.Scope != "Namespaced" || r.ResponseKind.Kind != "Flunder" || len(r.Subresources) != 1 || r.Subresources[0].Subresource != "status" {
		t.Errorf("flunders %+v", r)
	}
	if agg.Versions[1].Resources[0].Scope != "Cluster" {
		t.Errorf("fischers %+v", agg.Versions[1].Resources[0])
	}
}
