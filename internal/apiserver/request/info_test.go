package request

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		method, target string
		want           Info
	}{
		{"GET", "/api/v1/namespaces/ns/configmaps", Info{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "configmaps"}},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=1", Info{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "configmaps"}},
		{"GET", "/api/v1/watch/namespaces/ns/configmaps/x", Info{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "configmaps", Name: "x"}},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/d/scale", Info{IsResourceRequest: true, Verb: "get", APIPrefix: "apis", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments", Name: "d", Subresource: "scale"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", Info{IsResourceRequest: true, Verb: "update", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns", Subresource: "finalize"}},
		{"GET", "/api/v1/namespaces/ns", Info{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", Info{IsResourceRequest: true, Verb: "deletecollection", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"DELETE", "/api/v1/nodes/n", Info{IsResourceRequest: true, Verb: "delete", APIPrefix: "api", APIVersion: "v1", Resource: "nodes", Name: "n"}},
		{"PATCH", "/api/v1/nodes/n/status", Info{IsResourceRequest: true, Verb: "patch", APIPrefix: "api", APIVersion: "v1", Resource: "nodes", Name: "n", Subresource: "status"}},
		{"POST", "/api/v1/namespaces/ns/configmaps", Info{IsResourceRequest: true, Verb: "create", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "configmaps"}},
		{"GET", "/api/v1", Info{Verb: "get", APIPrefix: "api", APIVersion: "v1"}},
		{"GET", "/apis", Info{Verb: "get", APIPrefix: "apis"}},
		{"GET", "/api/v1/watch", Info{Verb: "get", APIPrefix: "api", APIVersion: "v1"}},
		{"GET", "/healthz", Info{Verb: "get"}},
		{"OPTIONS", "/api/v1/nodes", Info{IsResourceRequest: true, Verb: VerbUnknown, APIPrefix: "api", APIVersion: "v1", Resource: "nodes"}},
		{"deletecollection", "/api/v1/namespaces/ns/pods", Info{IsResourceRequest: true, Verb: VerbUnknown, APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces//pods", Info{Verb: "get"}},
	} {
		r, err := http.NewRequest(c.method, "https://h"+c.target, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := Parse(r)
		got.Path, got.Parts = "", nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.method, c.target, *got, c.want)
		}
	}
}

// FuzzParse: any path and method parse without panicking, and the verb agrees with the
// method.
func FuzzParse(f *testing.F) {
	for _, s := range []struct{ method, path, query string }{
		{"GET", "/api/v1/namespaces/ns/configmaps", "watch=true"},
		{"GET", "/apis/apps/v1/watch/namespaces/ns/deployments/d", ""},
		{"PUT", "/api/v1/namespaces/ns/finalize", ""},
		{"DELETE", "/api/v1/namespaces/ns/pods", ""},
		{"PATCH", "/apis/g/v/r/n/s/x/y", ""},
		{"POST", "/api", ""},
		{"HEAD", "/api/v1/namespaces", "watch=1"},
		{"BREW", "//api///v1/", "watch=%zz"},
		{"GET", "/apis/", ""},
		{"GET", "/api/v1/namespaces/", ""},
	} {
		f.Add(s.method, s.path, s.query)
	}
	f.Fuzz(func(t *testing.T, method, path, query string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}}
		info := Parse(r)
		if info == nil {
			t.Fatal("nil Info")
		}
		if info.Path != path {
			t.Errorf("Path %q, want %q", info.Path, path)
		}
		if !info.IsResourceRequest {
			if info.Verb != strings.ToLower(method) {
				t.Errorf("non-resource verb %q for method %q", info.Verb, method)
			}
			return
		}
		if info.APIPrefix != "api" && info.APIPrefix != "apis" {
			t.Errorf("resource request with prefix %q", info.APIPrefix)
		}
		want := map[string][]string{
			http.MethodGet: {"get", "list", "watch"}, http.MethodHead: {"get", "list", "watch"},
			http.MethodPost: {"create"}, http.MethodPut: {"update"}, http.MethodPatch: {"patch"},
			http.MethodDelete: {"delete", "deletecollection"},
		}[method]
		if want == nil {
			want = []string{VerbUnknown}
		}
		ok := false
		for _, v := range want {
			ok = ok || v == info.Verb
		}
		if !ok {
			t.Errorf("method %q gave verb %q, want one of %q", method, info.Verb, want)
		}
		if (info.Verb == "delete" || info.Verb == "get") && info.Name == "" {
			t.Errorf("verb %q without a name: %+v", info.Verb, info)
		}
		if (info.Verb == "list" || info.Verb == "deletecollection" || info.Verb == "create") && info.Name != "" && info.Verb != "create" {
			t.Errorf("verb %q with name %q", info.Verb, info.Name)
		}
		if info.Subresource != "" && info.Name == "" {
			t.Errorf("subresource %q without a name", info.Subresource)
		}
		if len(info.Parts) == 0 || info.Parts[0] != info.Resource {
			t.Errorf("Parts %q do not start with the resource %q", info.Parts, info.Resource)
		}
	})
}
