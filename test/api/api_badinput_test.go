package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	badNS = "bad-input"
	cms   = "/api/v1/namespaces/" + badNS + "/configmaps"
	seed  = cms + "/seed"
)

// badCase is one request a client gets wrong and the Status kube-apiserver answers it with.
type badCase struct {
	name         string
	method, path string
	contentType  string
	body         string
	header       []string
	code         int
	reason       metav1.StatusReason
	// causes are the details.causes fields of a 422, in order.
	causes []string
	// msg, when set, must be part of the message.
	msg string
	// plain: the answer is kube-apiserver's plain-text 404 (a path no served
	// group-version owns), not a Status.
	plain bool
}

func configMapJSON(name string, extra string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"` + extra + `},"data":{"a":"1"}}`
}

func badCases() []badCase {
	const (
		js    = "application/json"
		yml   = "application/yaml"
		merge = "application/merge-patch+json"
		jsonp = "application/json-patch+json"
		smp   = "application/strategic-merge-patch+json"
		apply = "application/apply-patch+yaml"
	)
	big := strings.Repeat("x", 4<<20)
	bigData := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"too-big"},"data":{"a":"` + strings.Repeat("y", 1<<20+100) + `"}}`
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	return []badCase{
		// Bodies that are not objects.
		{name: "malformed JSON", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1",`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed YAML", method: "POST", path: cms, contentType: yml, body: "apiVersion: v1\nkind: [ConfigMap\n", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "YAML list", method: "POST", path: cms, contentType: yml, body: "- a\n- b\n", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "empty body", method: "POST", path: cms, contentType: js, body: ``, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "JSON array", method: "POST", path: cms, contentType: js, body: `[1,2]`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "JSON string", method: "POST", path: cms, contentType: js, body: `"cm"`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "JSON null", method: "POST", path: cms, contentType: js, body: `null`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "binary garbage", method: "POST", path: cms, contentType: js, body: "\x00\xff\xfe{", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "deeply nested", method: "POST", path: cms, contentType: js, body: deep, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "metadata not an object", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":"x"}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "metadata.name a number", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":5}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "data not a map", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":[1]}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "Secret data not base64", method: "POST", path: "/api/v1/namespaces/" + badNS + "/secrets", contentType: js, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"not base64!"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "type error under Ignore", method: "POST", path: cms + "?fieldValidation=Ignore", contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"i"},"data":{"a":1}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "protobuf garbage", method: "POST", path: cms, contentType: "application/vnd.kubernetes.protobuf", body: "k8s\x00\x0a\x03bad", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "unsupported Content-Type", method: "POST", path: cms, contentType: "text/plain", body: configMapJSON("plain", ""), code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "malformed Content-Type", method: "POST", path: cms, contentType: "application/json;;=", body: configMapJSON("ct", ""), code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "unacceptable Accept", method: "GET", path: seed, header: []string{"Accept: application/xml"}, code: 406, reason: metav1.StatusReasonNotAcceptable},

		// Bodies that disagree with the URL.
		{name: "kind mismatch", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"k"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "apiVersion mismatch", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"k"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "namespace mismatch", method: "POST", path: cms, contentType: js, body: configMapJSON("n", `,"namespace":"default"`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "PUT name differs from URL", method: "PUT", path: seed, contentType: js, body: configMapJSON("other", ""), code: 400, reason: metav1.StatusReasonBadRequest, msg: "does not match the name on the URL"},
		{name: "PUT namespace differs from URL", method: "PUT", path: seed, contentType: js, body: configMapJSON("seed", `,"namespace":"default"`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "POST to a name", method: "POST", path: seed, contentType: js, body: configMapJSON("seed", ""), code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "POST into missing namespace", method: "POST", path: "/api/v1/namespaces/no-such-ns/configmaps", contentType: js, body: configMapJSON("m", ""), code: 404, reason: metav1.StatusReasonNotFound, msg: `namespaces "no-such-ns" not found`},
		{name: "PUT of a missing object", method: "PUT", path: cms + "/missing", contentType: js, body: configMapJSON("missing", ""), code: 404, reason: metav1.StatusReasonNotFound},

		// Invalid objects.
		{name: "invalid name", method: "POST", path: cms, contentType: js, body: configMapJSON("Bad_Name", ""), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}},
		{name: "missing name", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}},
		{name: "invalid generateName", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"Bad_"}}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.generateName", "metadata.name"}},
		{name: "invalid label value", method: "POST", path: cms, contentType: js, body: configMapJSON("l", `,"labels":{"app":"-x-"}`), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.labels"}},
		{name: "invalid label key", method: "POST", path: cms, contentType: js, body: configMapJSON("l", `,"labels":{"a/b/c":"x"}`), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.labels"}},
		{name: "invalid data key", method: "POST", path: cms, contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"k"},"data":{"a b":"1"}}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"data[a b]"}},
		{name: "ConfigMap over 1 MiB", method: "POST", path: cms, contentType: js, body: bigData, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"[]"}, msg: "Too long"},
		{name: "body over 3 MiB", method: "POST", path: cms, contentType: js, body: big, code: 413, reason: metav1.StatusReasonRequestEntityTooLarge},
		// kube-apiserver v1.37.2 answers this from NamespaceLifecycle admission, before validation.
		{name: "invalid namespace in URL", method: "POST", path: "/api/v1/namespaces/Bad_NS/configmaps", contentType: js, body: configMapJSON("x", ""), code: 404, reason: metav1.StatusReasonNotFound, msg: `namespaces "Bad_NS" not found`},

		// Field validation and write options.
		{name: "fieldValidation=Bogus", method: "POST", path: cms + "?fieldValidation=Bogus", contentType: js, body: configMapJSON("fv", ""), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"fieldValidation"}},
		{name: "fieldValidation=Strict unknown field", method: "POST", path: cms + "?fieldValidation=Strict", contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"},"bogus":1}`, code: 400, reason: metav1.StatusReasonBadRequest, msg: `unknown field "bogus"`},
		{name: "fieldValidation=Strict duplicate field", method: "POST", path: cms + "?fieldValidation=Strict", contentType: js, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s","name":"t"}}`, code: 400, reason: metav1.StatusReasonBadRequest, msg: `duplicate field`},
		{name: "dryRun=Bogus", method: "POST", path: cms + "?dryRun=Bogus", contentType: js, body: configMapJSON("dr", ""), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"dryRun"}},
		{name: "PUT dryRun=Bogus", method: "PUT", path: seed + "?dryRun=Bogus", contentType: js, body: configMapJSON("seed", ""), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"dryRun"}},

		// Patches.
		{name: "merge patch malformed", method: "PATCH", path: seed, contentType: merge, body: `{"data":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "merge patch not an object", method: "PATCH", path: seed, contentType: merge, body: `[1]`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "strategic merge patch malformed", method: "PATCH", path: seed, contentType: smp, body: `{"data":{`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "strategic merge patch bad directive", method: "PATCH", path: seed, contentType: smp, body: `{"$patch":"bogus"}`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "strategic merge patch wrong type", method: "PATCH", path: seed, contentType: smp, body: `{"data":"x"}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"patch"}},
		{name: "json patch malformed", method: "PATCH", path: seed, contentType: jsonp, body: `[{"op":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "json patch not a list", method: "PATCH", path: seed, contentType: jsonp, body: `{"op":"add"}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "json patch failing test", method: "PATCH", path: seed, contentType: jsonp, body: `[{"op":"test","path":"/data/a","value":"nope"}]`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "json patch missing path", method: "PATCH", path: seed, contentType: jsonp, body: `[{"op":"remove","path":"/data/nope"}]`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "json patch unknown op", method: "PATCH", path: seed, contentType: jsonp, body: `[{"op":"bogus","path":"/data/a"}]`, code: 422, reason: metav1.StatusReasonInvalid},
		{name: "merge patch wrong type", method: "PATCH", path: seed, contentType: merge, body: `{"data":{"a":1}}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"patch"}},
		{name: "json patch wrong type", method: "PATCH", path: seed, contentType: jsonp, body: `[{"op":"replace","path":"/metadata/labels","value":"x"}]`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"patch"}},
		{name: "patch renames", method: "PATCH", path: seed, contentType: merge, body: `{"metadata":{"name":"other"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "patch moves namespace", method: "PATCH", path: seed, contentType: merge, body: `{"metadata":{"namespace":"default"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "patch makes a label invalid", method: "PATCH", path: seed, contentType: merge, body: `{"metadata":{"labels":{"app":"-x-"}}}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.labels"}},
		{name: "patch with a stale resourceVersion", method: "PATCH", path: seed, contentType: merge, body: `{"metadata":{"resourceVersion":"1"}}`, code: 409, reason: metav1.StatusReasonConflict},
		{name: "patch Strict unknown field", method: "PATCH", path: seed + "?fieldValidation=Strict", contentType: merge, body: `{"bogus":1}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"patch"}},
		{name: "patch unsupported type", method: "PATCH", path: seed, contentType: "application/json", body: `{}`, code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "patch of a missing object", method: "PATCH", path: cms + "/missing", contentType: merge, body: `{}`, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "apply without fieldManager", method: "PATCH", path: seed, contentType: apply, body: configMapJSON("seed", ""), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "apply malformed YAML", method: "PATCH", path: seed + "?fieldManager=t", contentType: apply, body: "metadata: [\n", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "apply kind mismatch", method: "PATCH", path: seed + "?fieldManager=t", contentType: apply, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"seed"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "apply name mismatch", method: "PATCH", path: seed + "?fieldManager=t", contentType: apply, body: configMapJSON("other", ""), code: 400, reason: metav1.StatusReasonBadRequest},

		// List and watch parameters.
		{name: "labelSelector malformed", method: "GET", path: cms + "?labelSelector=a+in+(", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "labelSelector invalid key", method: "GET", path: cms + "?labelSelector=-a", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "labelSelector invalid value", method: "GET", path: cms + "?labelSelector=a%3D-x-", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "fieldSelector unsupported field", method: "GET", path: cms + "?fieldSelector=foo%3Dbar", code: 400, reason: metav1.StatusReasonBadRequest, msg: "field label not supported"},
		{name: "fieldSelector malformed", method: "GET", path: cms + "?fieldSelector=metadata.name", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "fieldSelector set operator", method: "GET", path: cms + "?fieldSelector=metadata.name+in+(a)", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "watch labelSelector malformed", method: "GET", path: cms + "?watch=true&labelSelector=a+in+(", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "watch fieldSelector unsupported", method: "GET", path: cms + "?watch=true&fieldSelector=foo%3Dbar", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "resourceVersionMatch=Bogus", method: "GET", path: cms + "?resourceVersion=0&resourceVersionMatch=Bogus", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"resourceVersionMatch"}},
		{name: "resourceVersionMatch without resourceVersion", method: "GET", path: cms + "?resourceVersionMatch=Exact", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"resourceVersionMatch"}},
		{name: "resourceVersion not a number", method: "GET", path: cms + "?resourceVersion=abc", code: 400, reason: metav1.StatusReasonBadRequest},
		// kube-apiserver treats a negative limit as none (200); Kube refuses it.
		{name: "limit=-1", method: "GET", path: cms + "?limit=-1", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "limit not a number", method: "GET", path: cms + "?limit=x", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "continue garbage", method: "GET", path: cms + "?limit=1&continue=garbage", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "timeoutSeconds=x", method: "GET", path: cms + "?watch=true&timeoutSeconds=x", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "allowWatchBookmarks=x", method: "GET", path: cms + "?watch=true&allowWatchBookmarks=x", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "sendInitialEvents without NotOlderThan", method: "GET", path: cms + "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"resourceVersionMatch"}},
		{name: "get resourceVersion not a number", method: "GET", path: seed + "?resourceVersion=abc", code: 400, reason: metav1.StatusReasonBadRequest},

		// Deletes.
		{name: "delete propagationPolicy=foo", method: "DELETE", path: seed + "?propagationPolicy=foo", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"propagationPolicy"}},
		{name: "delete body propagationPolicy=foo", method: "DELETE", path: seed, contentType: js, body: `{"propagationPolicy":"foo"}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"propagationPolicy"}},
		{name: "delete gracePeriodSeconds=x", method: "DELETE", path: seed + "?gracePeriodSeconds=x", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "delete negative gracePeriodSeconds", method: "DELETE", path: seed + "?gracePeriodSeconds=-5", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"gracePeriodSeconds"}},
		{name: "delete malformed body", method: "DELETE", path: seed, contentType: js, body: `{"propagationPolicy":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "delete dryRun=Bogus", method: "DELETE", path: seed + "?dryRun=Bogus", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"dryRun"}},
		{name: "delete wrong uid precondition", method: "DELETE", path: seed, contentType: js, body: `{"preconditions":{"uid":"not-the-uid"}}`, code: 409, reason: metav1.StatusReasonConflict},
		{name: "delete of a missing object", method: "DELETE", path: cms + "/missing", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "deletecollection labelSelector malformed", method: "DELETE", path: cms + "?labelSelector=a+in+(", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "deletecollection propagationPolicy=foo", method: "DELETE", path: cms + "?propagationPolicy=foo", code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"propagationPolicy"}},

		// Paths and methods.
		{name: "unknown resource", method: "GET", path: "/api/v1/namespaces/" + badNS + "/foos", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown group", method: "GET", path: "/apis/nope.example.com/v1/foos", code: 404, plain: true},
		{name: "unknown version", method: "GET", path: "/api/v2/configmaps", code: 404, plain: true},
		{name: "unknown subresource", method: "GET", path: seed + "/bogus", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "too many segments", method: "GET", path: seed + "/status/x", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "missing object", method: "GET", path: cms + "/missing", code: 404, reason: metav1.StatusReasonNotFound, msg: `configmaps "missing" not found`},
		{name: "unknown top-level path", method: "GET", path: "/nope", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "PUT on a collection", method: "PUT", path: cms, contentType: js, body: configMapJSON("x", ""), code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "PATCH on a collection", method: "PATCH", path: cms, contentType: merge, body: `{}`, code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "DELETE on a subresource", method: "DELETE", path: "/api/v1/namespaces/" + badNS + "/status", code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "OPTIONS on a resource", method: "OPTIONS", path: seed, code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "lower-case method", method: "deletecollection", path: cms, code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "unknown method", method: "BREW", path: seed, code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "status of a kind without it", method: "GET", path: seed + "/status", code: 404, reason: metav1.StatusReasonNotFound},
	}
}

// TestBadInput sends one bad request after another and checks each gets upstream's Status;
// afterwards the server still answers and nothing was written.
func TestBadInput(t *testing.T) {
	apiSuite.Need(t)
	mustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+badNS+`"}}`, 201)
	mustDo(t, "POST", cms, "application/json", configMapJSON("seed", `,"labels":{"app":"seed"}`), 201)
	before := listConfigMaps(t)

	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := do(t, admin, tc.method, tc.path, tc.contentType, body, tc.header...)
			if r.code != tc.code {
				t.Errorf("code %d, want %d: %.600s", r.code, tc.code, r.body)
			}
			if tc.plain {
				if string(r.body) != "404 page not found\n" {
					t.Errorf("body %q, want kube-apiserver's plain-text 404", r.body)
				}
				return
			}
			st := decodeStatus(t, r)
			if st.Reason != tc.reason {
				t.Errorf("reason %q, want %q: %.600s", st.Reason, tc.reason, r.body)
			}
			if tc.msg != "" && !strings.Contains(st.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", st.Message, tc.msg)
			}
			if tc.causes != nil {
				var got []string
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						got = append(got, c.Field)
					}
				}
				if !reflect.DeepEqual(got, tc.causes) {
					t.Errorf("cause fields %q, want %q: %.600s", got, tc.causes, r.body)
				}
			}
		})
	}

	mustDo(t, "GET", "/readyz", "", "", 200)
	after := listConfigMaps(t)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("failed requests changed the configmaps:\nbefore %v\nafter  %v", before, after)
	}
	mustDo(t, "GET", "/api/v1/namespaces/no-such-ns", "", "", 404)
}

// listConfigMaps is every ConfigMap in the cluster as name → resourceVersion.
func listConfigMaps(t *testing.T) map[string]string {
	t.Helper()
	r := mustDo(t, "GET", "/api/v1/configmaps", "", "", 200)
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range list.Items {
		if it.Name == "kube-root-ca.crt" {
			continue // published by a controller in every namespace, whenever it appears
		}
		out[it.Namespace+"/"+it.Name] = it.ResourceVersion
	}
	return out
}

// TestFieldValidationWarn: an unknown field under Warn (the default) creates the object and
// says so in a Warning header.
func TestFieldValidationWarn(t *testing.T) {
	apiSuite.Need(t)
	for _, q := range []string{"?fieldValidation=Warn", ""} {
		name := "warned" + strings.TrimPrefix(q, "?fieldValidation=")
		r := do(t, admin, "POST", "/api/v1/namespaces/default/configmaps"+q, "application/json",
			[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+strings.ToLower(name)+`"},"bogus":1}`))
		if r.code != http.StatusCreated {
			t.Fatalf("%q: code %d, want 201: %s", q, r.code, r.body)
		}
		w := r.header.Values("Warning")
		if len(w) != 1 || !strings.HasPrefix(w[0], `299 - "`) || !strings.Contains(w[0], `unknown field \"bogus\"`) {
			t.Errorf("%q: Warning headers %q, want one 299 naming the unknown field", q, w)
		}
	}
	r := do(t, admin, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Ignore", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ignored"},"bogus":1}`))
	if r.code != http.StatusCreated || len(r.header.Values("Warning")) != 0 {
		t.Errorf("Ignore: code %d, warnings %q; want 201 and none", r.code, r.header.Values("Warning"))
	}
}
