package rest

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/registry"
)

// The fuzzers below feed the request decoders and parameter parsers arbitrary input. They
// must never panic, and every error must be a client error: an *apierrors.StatusError with a
// 4xx code, which the handler writes as the Status a client sees.

// fuzzKinds are the kinds the fuzzers address: a built-in with Go types and field selectors
// beyond metadata (events), a plain built-in (configmaps) and a cluster-scoped one.
var fuzzKinds = func() []*registry.Kind {
	reg := registry.New()
	for _, k := range registry.Builtins() {
		reg.Add(k)
	}
	var out []*registry.Kind
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "events"},
		{Version: "v1", Resource: "namespaces"},
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	} {
		k, ok := reg.Lookup(gvr)
		if !ok {
			panic("no kind for " + gvr.String())
		}
		out = append(out, k)
	}
	return out
}()

// fuzzCall is a call on kind for a request with the given method, query, Content-Type and
// body. It reaches no storage; only parsing may be exercised with it.
func fuzzCall(kind *registry.Kind, method, verb, query, contentType string, body []byte) *call {
	r := httptest.NewRequest(method, "/api/v1/namespaces/ns/"+kind.Resource+"/x", bytes.NewReader(body))
	r.URL.RawQuery = query
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	info := &request.Info{IsResourceRequest: true, Verb: verb, APIVersion: kind.Version, APIGroup: kind.Group, Namespace: "ns", Resource: kind.Resource, Name: "x"}
	return &call{w: httptest.NewRecorder(), r: r, ctx: r.Context(), info: info, kind: kind, gr: schema.GroupResource{Group: kind.Group, Resource: kind.Resource}}
}

// clientError fails unless err is nil or a 4xx StatusError.
func clientError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("%s: %T %v is not a StatusError", what, err, err)
	}
	if c := se.Status().Code; c < 400 || c > 499 {
		t.Fatalf("%s: code %d (%v), want 4xx", what, c, err)
	}
}

var bodySeeds = []struct {
	contentType string
	body        string
}{
	{"application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"}}`},
	{"application/json", `{"metadata":"x"}`},
	{"application/json", `{"metadata":{"name":5},"data":[1]}`},
	{"application/json", `{"a":1,"a":2,"metadata":{"name":"a","name":"b"}}`},
	{"application/json", `[1,2,{}]`},
	{"application/json", `null`},
	{"application/json", `{"apiVersion":1,"kind":{}}`},
	{"application/json", "{\"data\":{\"k\":\"\xff\"}}"},
	{"application/json; charset=utf-8", `{}`},
	{"application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"},
	{"application/yaml", "a: &x [*x]\n"},
	{"application/yaml", "a: 1\na: 2\n"},
	{"application/yaml", "- 1\n- 2\n"},
	{"application/yaml", "metadata: {name: [\n"},
	{"application/apply-patch+yaml", "metadata:\n  labels:\n    a: b\n"},
	{"application/merge-patch+json", `{"data":null}`},
	{"application/strategic-merge-patch+json", `{"$patch":"replace"}`},
	{"application/json-patch+json", `[{"op":"add","path":"/a","value":1}]`},
	{"application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Status\x12\x00"},
	{"application/vnd.kubernetes.protobuf", "k8s\x00\xff\xff\xff"},
	{"application/vnd.kubernetes.protobuf", ""},
	{"text/plain", "x"},
	{"application/json;;", "{}"},
	{"", `{"kind":"ConfigMap"}`},
}

// FuzzDecodeBody runs a body through what create and update do with it: bodyJSON for its
// Content-Type, decodeObject, the apiVersion/kind check and field validation.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range bodySeeds {
		for k := range fuzzKinds {
			f.Add(s.contentType, []byte(s.body), uint8(k))
		}
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte, which uint8) {
		kind := fuzzKinds[int(which)%len(fuzzKinds)]
		for _, typed := range []bool{true, false} {
			data, err := bodyJSON(contentType, body, typed)
			clientError(t, "bodyJSON", err)
			if err != nil {
				continue
			}
			obj, err := decodeObject(data)
			clientError(t, "decodeObject", err)
			if err != nil {
				continue
			}
			for _, fv := range []string{"Strict", "Warn", "Ignore"} {
				c := fuzzCall(kind, "POST", "create", "", contentType, body)
				clientError(t, "checkTypeMeta", c.checkTypeMeta(obj.DeepCopy()))
				_, err := c.checkFields(writeOptions{fieldValidation: fv}, data, "")
				clientError(t, "checkFields "+fv, err)
				_, err = c.checkPatchedFields(writeOptions{fieldValidation: fv}, data, data)
				clientError(t, "checkPatchedFields "+fv, err)
				if kind.NewTyped != nil {
					if _, err := c.withoutUnknownFields(data, obj); err != nil {
						clientError(t, "withoutUnknownFields", err)
					}
				}
			}
			// What the handler reads from any decoded object must not panic either.
			_ = obj.GetName()
			_ = obj.GetNamespace()
			_ = obj.GetLabels()
			_ = obj.GetResourceVersion()
			_ = obj.GetGenerateName()
			_ = obj.GetFinalizers()
			_ = obj.GetDeletionTimestamp()
			_ = unstructured.Unstructured{Object: obj.Object}
		}
	})
}

// FuzzNegotiate: any Accept header gives a shape or 406.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{
		"",
		"application/json",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
		"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
		"application/vnd.kubernetes.protobuf, */*",
		"application/xml",
		"application/json;as=Bogus;g=meta.k8s.io;v=v1",
		"*/*;q=0.5, application/json;q=x",
		";;;,,=",
		"application/json;as=Table",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		for _, proto := range []bool{false, true} {
			out, err := negotiateFor(accept, proto)
			if err != nil {
				var se *apierrors.StatusError
				if !errors.As(err, &se) || se.Status().Code != http.StatusNotAcceptable {
					t.Fatalf("negotiate(%q): %v, want 406", accept, err)
				}
				continue
			}
			if out == outProtobuf && !proto {
				t.Fatalf("negotiate(%q): protobuf for a kind without it", accept)
			}
		}
	})
}

// FuzzDeleteOptions: DeleteOptions from any body and query parse or fail with 4xx.
func FuzzDeleteOptions(f *testing.F) {
	for _, s := range []struct{ query, contentType, body string }{
		{"", "", ""},
		{"propagationPolicy=foo", "", ""},
		{"propagationPolicy=Orphan&orphanDependents=true", "", ""},
		{"gracePeriodSeconds=-1&dryRun=All", "", ""},
		{"gracePeriodSeconds=x", "", ""},
		{"dryRun=Bogus&fieldValidation=x", "", ""},
		{"", "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background","preconditions":{"uid":"u","resourceVersion":"1"}}`},
		{"", "application/json", `{"propagationPolicy":5}`},
		{"", "application/json", `{"dryRun":["Bogus"]}`},
		{"", "application/json", `[`},
		{"", "application/yaml", "propagationPolicy: Foreground\n"},
		{"", "application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00"},
		{"", "text/plain", "x"},
		{"%zz=1&;", "", ""},
	} {
		f.Add(s.query, s.contentType, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, query, contentType string, body []byte) {
		for _, verb := range []string{"delete", "deletecollection"} {
			c := fuzzCall(fuzzKinds[0], "DELETE", verb, query, contentType, body)
			opts, _, err := c.deleteOptions()
			clientError(t, "deleteOptions", err)
			if err == nil && opts == nil {
				t.Fatal("no options and no error")
			}
		}
	})
}

// FuzzListParams: label and field selectors and the other list and watch parameters parse
// or fail with 4xx, and a parsed predicate can be matched against objects.
func FuzzListParams(f *testing.F) {
	for _, s := range []struct{ label, field, query string }{
		{"", "", ""},
		{"a in (", "", ""},
		{"a=b,c!=d,e in (f,g),!h,i notin (j),k", "metadata.name=x,metadata.namespace!=y", "limit=5&resourceVersion=10"},
		{"-a", "foo=bar", ""},
		{"a=-x-", "metadata.name", ""},
		{"x>1,y<2", "metadata.name in (a)", ""},
		{"", "involvedObject.name=a,involvedObject.kind==Pod,type=Normal,reason=x", "watch=true"},
		{"", "metadata.name=a\\,b", ""},
		{"", "", "resourceVersionMatch=Bogus&resourceVersion=0"},
		{"", "", "resourceVersionMatch=Exact&resourceVersion=0"},
		{"", "", "resourceVersionMatch=NotOlderThan&sendInitialEvents=true&allowWatchBookmarks=x"},
		{"", "", "limit=-1&continue=abc&resourceVersion=5"},
		{"", "", "timeoutSeconds=x&limit=99999999999999999999999"},
		{"", "", "%zz&;;="},
	} {
		for k := range fuzzKinds {
			f.Add(s.label, s.field, s.query, uint8(k))
		}
	}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{}},
		{Object: map[string]any{"metadata": map[string]any{"name": "a", "namespace": "b", "labels": map[string]any{"a": "b", "x": "10"}}, "involvedObject": map[string]any{"name": "a"}}},
		{Object: map[string]any{"metadata": "garbage", "type": 5}},
	}
	f.Fuzz(func(t *testing.T, label, field, query string, which uint8) {
		kind := fuzzKinds[int(which)%len(fuzzKinds)]
		q, _ := url.ParseQuery(query)
		if label != "" {
			q.Set("labelSelector", label)
		}
		if field != "" {
			q.Set("fieldSelector", field)
		}
		c := fuzzCall(kind, "GET", "list", q.Encode(), "", nil)
		p, err := c.parseListParams(q)
		clientError(t, "parseListParams", err)
		if err != nil {
			return
		}
		for _, o := range objs {
			p.pred.Matches(o)
		}
		if p.pred.Label != nil {
			_ = p.pred.Label.String()
		}
		if p.pred.Field != nil {
			_ = p.pred.Field.String()
		}
	})
}
