package registry

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/util/json"
)

func builtin(t testing.TB, group, resource string) *Kind {
	t.Helper()
	for _, k := range Builtins() {
		if k.Group == group && k.Resource == resource {
			return k
		}
	}
	t.Fatalf("no built-in %s in group %q", resource, group)
	return nil
}

// obj parses a JSON object the way the handler's decoder does (integers as int64).
func obj(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := kjson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test object %s: %v", s, err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestBuiltinNames(t *testing.T) {
	type names struct {
		kind, list, singular string
		short, categories    []string
		namespaced, status   bool
		schemaName           string
	}
	want := map[schema.GroupVersionResource]names{
		{Version: "v1", Resource: "namespaces"}:                                              {"Namespace", "NamespaceList", "namespace", []string{"ns"}, nil, false, true, "io.k8s.api.core.v1.Namespace"},
		{Version: "v1", Resource: "configmaps"}:                                              {"ConfigMap", "ConfigMapList", "configmap", []string{"cm"}, nil, true, false, "io.k8s.api.core.v1.ConfigMap"},
		{Version: "v1", Resource: "secrets"}:                                                 {"Secret", "SecretList", "secret", nil, nil, true, false, "io.k8s.api.core.v1.Secret"},
		{Version: "v1", Resource: "serviceaccounts"}:                                         {"ServiceAccount", "ServiceAccountList", "serviceaccount", []string{"sa"}, nil, true, false, "io.k8s.api.core.v1.ServiceAccount"},
		{Version: "v1", Resource: "events"}:                                                  {"Event", "EventList", "event", []string{"ev"}, nil, true, false, "io.k8s.api.core.v1.Event"},
		{Group: "events.k8s.io", Version: "v1", Resource: "events"}:                          {"Event", "EventList", "event", []string{"ev"}, nil, true, false, "io.k8s.api.events.v1.Event"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}:                    {"Lease", "LeaseList", "lease", nil, nil, true, false, "io.k8s.api.coordination.v1.Lease"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}:               {"Role", "RoleList", "role", nil, nil, true, false, "io.k8s.api.rbac.v1.Role"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}:        {"RoleBinding", "RoleBindingList", "rolebinding", nil, nil, true, false, "io.k8s.api.rbac.v1.RoleBinding"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}:        {"ClusterRole", "ClusterRoleList", "clusterrole", nil, nil, false, false, "io.k8s.api.rbac.v1.ClusterRole"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}: {"ClusterRoleBinding", "ClusterRoleBindingList", "clusterrolebinding", nil, nil, false, false, "io.k8s.api.rbac.v1.ClusterRoleBinding"},
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}: {"CustomResourceDefinition", "CustomResourceDefinitionList", "customresourcedefinition",
			[]string{"crd", "crds"}, []string{"api-extensions"}, false, true, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}: {"MutatingWebhookConfiguration", "MutatingWebhookConfigurationList",
			"mutatingwebhookconfiguration", nil, []string{"api-extensions"}, false, false, "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}: {"ValidatingWebhookConfiguration", "ValidatingWebhookConfigurationList",
			"validatingwebhookconfiguration", nil, []string{"api-extensions"}, false, false, "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}: {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyList",
			"validatingadmissionpolicy", nil, []string{"api-extensions"}, false, true, "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}: {"ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBindingList",
			"validatingadmissionpolicybinding", nil, []string{"api-extensions"}, false, false, "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding"},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}:  {"SelfSubjectAccessReview", "", "selfsubjectaccessreview", nil, nil, false, false, "io.k8s.api.authorization.v1.SelfSubjectAccessReview"},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}:      {"SubjectAccessReview", "", "subjectaccessreview", nil, nil, false, false, "io.k8s.api.authorization.v1.SubjectAccessReview"},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "localsubjectaccessreviews"}: {"LocalSubjectAccessReview", "", "localsubjectaccessreview", nil, nil, true, false, "io.k8s.api.authorization.v1.LocalSubjectAccessReview"},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews"}:   {"SelfSubjectRulesReview", "", "selfsubjectrulesreview", nil, nil, false, false, "io.k8s.api.authorization.v1.SelfSubjectRulesReview"},
		{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}:       {"SelfSubjectReview", "", "selfsubjectreview", nil, nil, false, false, "io.k8s.api.authentication.v1.SelfSubjectReview"},
		{Group: "authentication.k8s.io", Version: "v1beta1", Resource: "selfsubjectreviews"}:  {"SelfSubjectReview", "", "selfsubjectreview", nil, nil, false, false, "io.k8s.api.authentication.v1beta1.SelfSubjectReview"},
		{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}:             {"TokenReview", "", "tokenreview", nil, nil, false, false, "io.k8s.api.authentication.v1.TokenReview"},
	}
	got := map[schema.GroupVersionResource]bool{}
	for _, k := range Builtins() {
		w, ok := want[k.GVR()]
		if !ok {
			t.Errorf("unexpected built-in %v", k.GVR())
			continue
		}
		got[k.GVR()] = true
		g := names{k.Kind, k.ListKind, k.Singular, k.ShortNames, k.Categories, k.Namespaced, k.Status, k.SchemaName}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%v:\n got %+v\nwant %+v", k.GVR(), g, w)
		}
		if o := k.NewTyped(); o == nil || reflect.TypeOf(o).Elem().Name() != k.Kind {
			t.Errorf("%v: NewTyped gives %T", k.GVR(), o)
		}
		if k.Verbs != nil && !k.Supports("list") {
			continue // computed kinds (access reviews) have no list and no strategy
		}
		if l := k.NewTypedList(); l == nil || reflect.TypeOf(l).Elem().Name() != k.ListKind {
			t.Errorf("%v: NewTypedList gives %T", k.GVR(), l)
		}
		if k.Strategy == nil {
			t.Errorf("%v: no strategy", k.GVR())
		}
	}
	for gvr := range want {
		if !got[gvr] {
			t.Errorf("missing built-in %v", gvr)
		}
	}
	if v := builtin(t, "", "namespaces").VerbList(); contains(v, "deletecollection") {
		t.Errorf("namespaces verbs %v include deletecollection", v)
	}
}

// TestBuiltinsCost prints what building the kinds and their schemas costs (no threshold).
func TestBuiltinsCost(t *testing.T) {
	start := time.Now()
	ks := Builtins()
	built := time.Since(start)
	start = time.Now()
	for _, k := range ks {
		_ = k.OpenAPISchema()
	}
	v2 := time.Since(start)
	start = time.Now()
	defs := DefinitionsV3()
	v3 := time.Since(start)
	b, _ := json.Marshal(Definitions())
	t.Logf("Builtins(): %v for %d kinds; first OpenAPISchema (all v2 definitions, %d): %v; v3 definitions: %v; v2 definitions JSON %d KiB",
		built, len(ks), len(defs), v2, v3, len(b)/1024)
}

func BenchmarkBuiltins(b *testing.B) {
	for b.Loop() {
		_ = Builtins()
	}
}

func BenchmarkDefinitions(b *testing.B) {
	for b.Loop() {
		_ = buildDefinitions(RefPrefixV2, false)
	}
}

func TestTableColumns(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	created := `"creationTimestamp":"2025-01-01T11:00:00Z"`
	tests := []struct {
		group, resource string
		obj             string
		headers         []string
		cells           []any
	}{
		{"", "configmaps", `{"metadata":{"name":"c",` + created + `},"data":{"a":"1","b":"2"},"binaryData":{"c":"AA=="}}`,
			[]string{"Name", "Data", "Age"}, []any{"c", int64(3), "60m"}},
		{"", "configmaps", `{"metadata":{"name":"c"},"data":5}`,
			[]string{"Name", "Data", "Age"}, []any{"c", int64(0), "<unknown>"}},
		{"", "secrets", `{"metadata":{"name":"s",` + created + `},"type":"Opaque","data":{"a":"MQ=="}}`,
			[]string{"Name", "Type", "Data", "Age"}, []any{"s", "Opaque", int64(1), "60m"}},
		{"", "namespaces", `{"metadata":{"name":"n",` + created + `},"status":{"phase":"Active"}}`,
			[]string{"Name", "Status", "Age"}, []any{"n", "Active", "60m"}},
		{"", "serviceaccounts", `{"metadata":{"name":"default",` + created + `},"secrets":[{"name":"x"}]}`,
			[]string{"Name", "Secrets", "Age"}, []any{"default", int64(1), "60m"}},
		{"", "events", `{"metadata":{"name":"e.1"},"involvedObject":{"kind":"Pod","name":"p","fieldPath":"spec.containers{c}"},"reason":"Started","message":" hi \n","type":"Normal",
			"firstTimestamp":"2025-01-01T11:00:00Z","lastTimestamp":"2025-01-01T11:55:00Z","count":3,"source":{"component":"kubelet","host":"node1"}}`,
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"5m", "Normal", "Started", "pod/p", "spec.containers{c}", "kubelet, node1", "hi", "60m", int64(3), "e.1"}},
		{"", "events", `{"metadata":{"name":"e.2"},"involvedObject":{"kind":"Node"},"eventTime":"2025-01-01T11:59:00.000000Z","reportingComponent":"ctl","reason":"R","type":"Warning"}`,
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"60s", "Warning", "R", "node", "", "ctl", "", "60s", int64(1), "e.2"}},
		{"events.k8s.io", "events", `{"metadata":{"name":"e.3"},"regarding":{"kind":"Pod","name":"p"},"eventTime":"2025-01-01T11:00:00.000000Z","reportingController":"c","reportingInstance":"i",
			"series":{"count":4,"lastObservedTime":"2025-01-01T11:58:00.000000Z"},"note":"n","reason":"R","type":"Normal"}`,
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"2m", "Normal", "R", "pod/p", "", "c, i", "n", "60m", int64(4), "e.3"}},
		{"coordination.k8s.io", "leases", `{"metadata":{"name":"l",` + created + `},"spec":{"holderIdentity":"me"}}`,
			[]string{"Name", "Holder", "Age"}, []any{"l", "me", "60m"}},
		{"rbac.authorization.k8s.io", "roles", `{"metadata":{"name":"r",` + created + `}}`,
			[]string{"Name", "Created At"}, []any{"r", "2025-01-01T11:00:00Z"}},
		{"rbac.authorization.k8s.io", "clusterroles", `{"metadata":{"name":"r",` + created + `}}`,
			[]string{"Name", "Created At"}, []any{"r", "2025-01-01T11:00:00Z"}},
		{"rbac.authorization.k8s.io", "rolebindings", `{"metadata":{"name":"b",` + created + `},"roleRef":{"kind":"ClusterRole","name":"view"},
			"subjects":[{"kind":"User","name":"u1"},{"kind":"User","name":"u2"},{"kind":"Group","name":"g"},{"kind":"ServiceAccount","namespace":"ns","name":"sa"}]}`,
			[]string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, []any{"b", "ClusterRole/view", "60m", "u1, u2", "g", "ns/sa"}},
		{"rbac.authorization.k8s.io", "clusterrolebindings", `{"metadata":{"name":"b",` + created + `},"roleRef":{"kind":"ClusterRole","name":"admin"}}`,
			[]string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, []any{"b", "ClusterRole/admin", "60m", "", "", ""}},
		{"apiextensions.k8s.io", "customresourcedefinitions", `{"metadata":{"name":"a.b.c",` + created + `}}`,
			[]string{"Name", "Created At"}, []any{"a.b.c", "2025-01-01T11:00:00Z"}},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", `{"metadata":{"name":"w",` + created + `},"webhooks":[{},{}]}`,
			[]string{"Name", "Webhooks", "Age"}, []any{"w", int64(2), "60m"}},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", `{"metadata":{"name":"w",` + created + `}}`,
			[]string{"Name", "Webhooks", "Age"}, []any{"w", int64(0), "60m"}},
	}
	for _, tt := range tests {
		t.Run(tt.group+"/"+tt.resource, func(t *testing.T) {
			k := builtin(t, tt.group, tt.resource)
			o := obj(t, tt.obj)
			var headers []string
			var cells []any
			for _, c := range k.TableColumns() {
				headers = append(headers, c.Name)
				cells = append(cells, c.Value(o, now))
			}
			if !reflect.DeepEqual(headers, tt.headers) {
				t.Errorf("headers %q, want %q", headers, tt.headers)
			}
			if !reflect.DeepEqual(cells, tt.cells) {
				t.Errorf("cells %#v,\nwant %#v", cells, tt.cells)
			}
		})
	}
}

func TestAttrs(t *testing.T) {
	tests := []struct {
		group, resource string
		obj             string
		want            map[string]string
	}{
		{"", "configmaps", `{"metadata":{"name":"c","namespace":"ns","labels":{"a":"b"}}}`,
			map[string]string{"metadata.name": "c", "metadata.namespace": "ns"}},
		{"", "secrets", `{"metadata":{"name":"s","namespace":"ns"},"type":"kubernetes.io/tls"}`,
			map[string]string{"metadata.name": "s", "metadata.namespace": "ns", "type": "kubernetes.io/tls"}},
		{"", "namespaces", `{"metadata":{"name":"n"},"status":{"phase":"Terminating"}}`,
			map[string]string{"metadata.name": "n", "metadata.namespace": "", "status.phase": "Terminating", "name": "n"}},
		{"", "events", `{"metadata":{"name":"e","namespace":"ns"},"involvedObject":{"kind":"Pod","namespace":"ns","name":"p","uid":"u","apiVersion":"v1","resourceVersion":"7","fieldPath":"f"},
			"reason":"R","reportingComponent":"rc","type":"Normal"}`,
			map[string]string{"metadata.name": "e", "metadata.namespace": "ns", "involvedObject.kind": "Pod", "involvedObject.namespace": "ns",
				"involvedObject.name": "p", "involvedObject.uid": "u", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "7",
				"involvedObject.fieldPath": "f", "reason": "R", "reportingComponent": "rc", "source": "rc", "type": "Normal",
				"regarding.kind": "Pod", "regarding.namespace": "ns", "regarding.name": "p", "regarding.uid": "u", "regarding.apiVersion": "v1",
				"regarding.resourceVersion": "7", "regarding.fieldPath": "f", "reportingController": "rc", "deprecatedSource": "rc"}},
		{"", "events", `{"metadata":{"name":"e","namespace":"ns"},"source":{"component":"kubelet"},"involvedObject":5}`,
			map[string]string{"metadata.name": "e", "metadata.namespace": "ns", "involvedObject.kind": "", "involvedObject.namespace": "",
				"involvedObject.name": "", "involvedObject.uid": "", "involvedObject.apiVersion": "", "involvedObject.resourceVersion": "",
				"involvedObject.fieldPath": "", "reason": "", "reportingComponent": "", "source": "kubelet", "type": "",
				"regarding.kind": "", "regarding.namespace": "", "regarding.name": "", "regarding.uid": "", "regarding.apiVersion": "",
				"regarding.resourceVersion": "", "regarding.fieldPath": "", "reportingController": "", "deprecatedSource": "kubelet"}},
	}
	for _, tt := range tests {
		k := builtin(t, tt.group, tt.resource)
		l, f := k.AttrFunc()(obj(t, tt.obj))
		if got := map[string]string(f); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: fields\n got %v\nwant %v", tt.resource, got, tt.want)
		}
		if tt.resource == "configmaps" && l["a"] != "b" {
			t.Errorf("labels %v", l)
		}
	}
	// events.k8s.io Events are stored as core Events and share their watch cache: the same
	// attributes, read from the stored (core) form, under both APIs' names.
	ev := builtin(t, "events.k8s.io", "events")
	_, f := ev.AttrFunc()(obj(t, `{"metadata":{"name":"e"},"involvedObject":{"name":"p"},"reportingComponent":"c"}`))
	if f["regarding.name"] != "p" || f["involvedObject.name"] != "p" || f["reportingController"] != "c" {
		t.Errorf("events.k8s.io fields %v", f)
	}
	if ev.Prefix() != builtin(t, "", "events").Prefix() {
		t.Errorf("events.k8s.io prefix %s, want the core events'", ev.Prefix())
	}
}

func TestNameAndAgeColumns(t *testing.T) {
	n, a := NameColumn(), AgeColumn()
	if n.Format != "name" || n.Description == "" || a.Description == "" {
		t.Errorf("Name %+v, Age %+v", n, a)
	}
}
