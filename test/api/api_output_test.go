package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	mustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`, 201)
}

// TestMetadataClient: client-go's metadata client lists, gets and watches
// PartialObjectMetadata(List) with the Accept header it really sends.
func TestMetadataClient(t *testing.T) {
	apiSuite.Need(t)
	const ns = "metadata-client"
	createNamespace(t, ns)
	for _, n := range []string{"m1", "m2"} {
		mustDo(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", "application/json", configMapJSON(n, `,"labels":{"app":"meta"}`), 201)
	}
	mc, err := metadata.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := mc.Resource(configMapsGVR).Namespace(ns)

	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: "app=meta"})
	if err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion == "" {
		t.Error("list without a resourceVersion")
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d items, want 2", len(list.Items))
	}
	for _, it := range list.Items {
		if it.Namespace != ns || it.UID == "" || it.Labels["app"] != "meta" {
			t.Errorf("item %+v lacks its metadata", it.ObjectMeta)
		}
	}

	got, err := res.Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "m1" || got.Labels["app"] != "meta" || got.UID == "" {
		t.Errorf("get: %+v", got.ObjectMeta)
	}

	// Selected as the list was: the namespace's kube-root-ca.crt may be created meanwhile.
	w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, LabelSelector: "app=meta"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustDo(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", "application/json", configMapJSON("m3", `,"labels":{"app":"meta"}`), 201)
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		pom, isPOM := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Added || !isPOM {
			t.Fatalf("event %s %T, want ADDED *PartialObjectMetadata: %+v", ev.Type, ev.Object, ev.Object)
		}
		if pom.Name != "m3" {
			t.Errorf("event object %q, want m3", pom.Name)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}

	// The client drops kind and apiVersion when it decodes; on the wire they must be there,
	// in the JSON form and in the protobuf envelope (which the metadata client asks for first).
	for _, c := range []struct{ path, accept, kind string }{
		{"", "PartialObjectMetadataList", "PartialObjectMetadataList"},
		{"/m1", "PartialObjectMetadata", "PartialObjectMetadata"},
	} {
		accept := "application/json;as=" + c.accept + ";g=meta.k8s.io;v=v1,application/json"
		r := do(t, admin, "GET", "/api/v1/namespaces/"+ns+"/configmaps"+c.path, "", nil, "Accept: "+accept)
		var tm metav1.TypeMeta
		if err := json.Unmarshal(r.body, &tm); r.code != 200 || err != nil || tm.Kind != c.kind || tm.APIVersion != "meta.k8s.io/v1" {
			t.Errorf("GET %s as JSON %s: %d %s %s, want %s meta.k8s.io/v1", c.path, c.accept, r.code, tm.Kind, tm.APIVersion, c.kind)
		}
		accept = "application/vnd.kubernetes.protobuf;as=" + c.accept + ";g=meta.k8s.io;v=v1," + accept
		r = do(t, admin, "GET", "/api/v1/namespaces/"+ns+"/configmaps"+c.path, "", nil, "Accept: "+accept)
		var u runtime.Unknown
		if r.code != 200 || r.header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(r.body, []byte("k8s\x00")) ||
			u.Unmarshal(r.body[4:]) != nil || u.Kind != c.kind || u.APIVersion != "meta.k8s.io/v1" {
			t.Errorf("GET %s as protobuf %s: %d %q %s %s, want %s meta.k8s.io/v1", c.path, c.accept, r.code, r.header.Get("Content-Type"), u.Kind, u.APIVersion, c.kind)
		}
	}
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// checkTable checks a Table's shape and that every row carries its object with kind and
// apiVersion (kubectl prints a blank row otherwise).
func checkTable(t *testing.T, raw []byte, rows int, columns bool) *metav1.Table {
	t.Helper()
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatalf("not a Table: %v: %s", err, raw)
	}
	if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" {
		t.Errorf("kind %q apiVersion %q, want Table meta.k8s.io/v1", tbl.Kind, tbl.APIVersion)
	}
	if columns && (len(tbl.ColumnDefinitions) == 0 || tbl.ColumnDefinitions[0].Name != "Name") {
		t.Errorf("columns %+v, want Name first", tbl.ColumnDefinitions)
	}
	if len(tbl.Rows) != rows {
		t.Fatalf("%d rows, want %d: %s", len(tbl.Rows), rows, raw)
	}
	for _, r := range tbl.Rows {
		var obj metav1.PartialObjectMetadata
		if err := json.Unmarshal(r.Object.Raw, &obj); err != nil {
			t.Fatalf("row object: %v", err)
		}
		if obj.Kind != "PartialObjectMetadata" || obj.APIVersion != "meta.k8s.io/v1" || obj.Name == "" {
			t.Errorf("row object %s %s %q, want PartialObjectMetadata meta.k8s.io/v1 with a name", obj.Kind, obj.APIVersion, obj.Name)
		}
		if columns && len(r.Cells) != len(tbl.ColumnDefinitions) {
			t.Errorf("%d cells for %d columns", len(r.Cells), len(tbl.ColumnDefinitions))
		}
	}
	return &tbl
}

// TestTable: kubectl get's Accept header gives Tables for list, get and watch.
func TestTable(t *testing.T) {
	apiSuite.Need(t)
	const ns = "table-output"
	createNamespace(t, ns)
	base := "/api/v1/namespaces/" + ns + "/configmaps"
	for _, n := range []string{"t1", "t2"} {
		mustDo(t, "POST", base, "application/json", configMapJSON(n, ""), 201)
	}
	// The namespace's kube-root-ca.crt (published in every namespace) is left out.
	r := do(t, admin, "GET", base+"?limit=500&fieldSelector=metadata.name!=kube-root-ca.crt", "", nil, "Accept: "+tableAccept)
	if r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	tbl := checkTable(t, r.body, 2, true)
	if tbl.ResourceVersion == "" {
		t.Error("list table without a resourceVersion")
	}
	if tbl.Rows[0].Cells[0] != "t1" {
		t.Errorf("first cell %v, want t1", tbl.Rows[0].Cells[0])
	}

	r = do(t, admin, "GET", base+"/t2", "", nil, "Accept: "+tableAccept)
	if r.code != 200 {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	checkTable(t, r.body, 1, true)

	r = do(t, admin, "GET", base+"?includeObject=Object&fieldSelector=metadata.name!=kube-root-ca.crt", "", nil, "Accept: "+tableAccept)
	var full metav1.Table
	if err := json.Unmarshal(r.body, &full); err != nil || len(full.Rows) != 2 || !strings.Contains(string(full.Rows[0].Object.Raw), `"kind":"ConfigMap"`) {
		t.Errorf("includeObject=Object: rows do not carry the ConfigMap: %.300s", r.body)
	}

	// Watch: one Table per event, the first with the columns.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+base+"?watch=true&fieldSelector=metadata.name!=kube-root-ca.crt&resourceVersion="+tbl.ResourceVersion, nil)
	req.Header.Set("Accept", tableAccept)
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	mustDo(t, "POST", base, "application/json", configMapJSON("t3", ""), 201)
	mustDo(t, "DELETE", base+"/t3", "", "", 200)
	dec := json.NewDecoder(resp.Body)
	for i, want := range []string{"ADDED", "DELETED"} {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Type != want {
			t.Errorf("event %d type %s, want %s", i, ev.Type, want)
		}
		checkTable(t, ev.Object, 1, i == 0)
	}
}

// TestMetrics: request counts by verb, resource and code appear on /metrics.
func TestMetrics(t *testing.T) {
	apiSuite.Need(t)
	mustDo(t, "GET", "/api/v1/namespaces/default/configmaps", "", "", 200)
	mustDo(t, "GET", "/api/v1/namespaces/default/configmaps/no-such-thing", "", "", 404)
	r := mustDo(t, "GET", "/metrics", "", "", 200)
	body := string(r.body)
	for _, want := range [][]string{
		{`verb="LIST"`, `resource="configmaps"`, `code="200"`},
		{`verb="GET"`, `resource="configmaps"`, `code="404"`},
	} {
		found := false
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "kube_apiserver_requests_total{") {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			found = found || all
		}
		if !found {
			t.Errorf("no kube_apiserver_requests_total sample with %v", want)
		}
	}
	for _, name := range []string{"kube_apiserver_request_duration_seconds_bucket", "kube_apiserver_inflight_requests"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestHealthAndVersion: /readyz?verbose lists its checks, /version is strict semver, and
// without a client certificate only those endpoints answer.
func TestHealthAndVersion(t *testing.T) {
	apiSuite.Need(t)
	r := mustDo(t, "GET", "/readyz?verbose", "", "", 200)
	for _, want := range []string{"[+]ping ok", "[+]etcd ok", "readyz check passed"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/readyz?verbose lacks %q:\n%s", want, r.body)
		}
	}
	mustDo(t, "GET", "/readyz/etcd", "", "", 200)
	mustDo(t, "GET", "/livez", "", "", 200)

	r = mustDo(t, "GET", "/version", "", "", 200)
	var v struct{ Major, Minor, GitVersion string }
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	sv, err := version.ParseSemantic(v.GitVersion)
	if err != nil {
		t.Fatalf("gitVersion %q is not semver: %v", v.GitVersion, err)
	}
	if v.Major != "1" || v.Minor != itoa(sv.Minor()) {
		t.Errorf("major %q minor %q disagree with gitVersion %q", v.Major, v.Minor, v.GitVersion)
	}

	anon, err := rest.HTTPClientFor(rest.AnonymousClientConfig(adminConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		code int
	}{{"/api", 401}, {"/api/v1/namespaces/default/configmaps", 401}, {"/metrics", 401}, {"/openapi/v2", 401}, {"/healthz", 200}, {"/readyz", 200}, {"/livez", 200}, {"/version", 200}} {
		r := do(t, anon, "GET", c.path, "", nil)
		if r.code != c.code {
			t.Errorf("anonymous GET %s: %d, want %d", c.path, r.code, c.code)
			continue
		}
		if c.code == 401 {
			if st := decodeStatus(t, r); st.Reason != metav1.StatusReasonUnauthorized {
				t.Errorf("anonymous GET %s: reason %q, want Unauthorized", c.path, st.Reason)
			}
		}
	}
	r = do(t, anon, "POST", "/api/v1/namespaces/default/configmaps", "application/json", []byte(configMapJSON("anon", "")))
	if r.code != 401 {
		t.Errorf("anonymous POST: %d, want 401", r.code)
	}
}

func itoa(n uint) string {
	b, _ := json.Marshal(n)
	return string(b)
}
