package registry

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func paths(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Field)
	}
	sort.Strings(out)
	return out
}

func TestValidate(t *testing.T) {
	bigValue := strings.Repeat("x", maxSecretSize)
	tests := []struct {
		name, group, resource string
		obj                   string
		want                  []string // field paths of the errors, sorted; empty: valid
	}{
		{"namespace ok", "", "namespaces", `{"metadata":{"name":"team-a"}}`, nil},
		// The handler generates the name from generateName before Validate, as kube-apiserver does.
		{"namespace generateName only", "", "namespaces", `{"metadata":{"generateName":"team-"}}`, []string{"metadata.name"}},
		{"namespace generated", "", "namespaces", `{"metadata":{"generateName":"team-","name":"team-x1"}}`, nil},
		{"namespace no name", "", "namespaces", `{"metadata":{}}`, []string{"metadata.name"}},
		{"namespace dots", "", "namespaces", `{"metadata":{"name":"a.b"}}`, []string{"metadata.name"}},
		{"namespace with namespace", "", "namespaces", `{"metadata":{"name":"a","namespace":"x"}}`, []string{"metadata.namespace"}},
		{"namespace bad finalizer", "", "namespaces", `{"metadata":{"name":"a"},"spec":{"finalizers":["kubernetes","foo"]}}`, []string{"spec.finalizers[1]"}},
		{"configmap ok", "", "configmaps", `{"metadata":{"name":"c.1","namespace":"default","labels":{"app":"x"}},"data":{"a.b-c_d":"1"},"binaryData":{"bin":"AAE="}}`, nil},
		{"configmap no namespace", "", "configmaps", `{"metadata":{"name":"c"}}`, []string{"metadata.namespace"}},
		{"configmap bad key", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"data":{"a/b":"1"}}`, []string{"data[a/b]"}},
		{"configmap duplicate key", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"data":{"k":"1"},"binaryData":{"k":"AA=="}}`, []string{"data[k]"}},
		{"configmap data not a map", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"data":5}`, []string{"data"}},
		{"configmap data value number", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"data":{"a":5}}`, []string{"data[a]"}},
		{"configmap binaryData not base64", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"binaryData":{"a":"!!"}}`, []string{"binaryData[a]"}},
		{"configmap too big", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"data":{"a":"` + bigValue + `","b":"x"}}`, []string{"[]"}}, // kube-apiserver's path for the whole object
		{"configmap bad label", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","labels":{"a":"-x-"}}}`, []string{"metadata.labels"}},
		{"configmap labels wrong type", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","labels":["a"]}}`, []string{"metadata.labels"}},
		{"configmap annotations too big", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","annotations":{"a":"` + strings.Repeat("x", 256*1024) + `"}}}`, []string{"metadata.annotations"}},
		{"configmap bad finalizer", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","finalizers":["a/b/c"]}}`, []string{"metadata.finalizers"}},
		{"configmap bad ownerRef", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"","uid":"u"}]}}`, []string{"metadata.ownerReferences[0].name"}},
		{"configmap name upper", "", "configmaps", `{"metadata":{"name":"C","namespace":"d"}}`, []string{"metadata.name"}},
		{"configmap metadata string", "", "configmaps", `{"metadata":"x"}`, []string{"metadata"}},
		{"configmap immutable wrong type", "", "configmaps", `{"metadata":{"name":"c","namespace":"d"},"immutable":"yes"}`, []string{"immutable"}},
		{"secret ok", "", "secrets", `{"metadata":{"name":"s","namespace":"d"},"type":"Opaque","data":{"a":"MQ=="}}`, nil},
		{"secret bad base64", "", "secrets", `{"metadata":{"name":"s","namespace":"d"},"data":{"a":"not base64!"}}`, []string{"data[a]"}},
		{"secret bad key", "", "secrets", `{"metadata":{"name":"s","namespace":"d"},"data":{"a b":"MQ=="}}`, []string{"data[a b]"}},
		{"secret tls missing keys", "", "secrets", `{"metadata":{"name":"s","namespace":"d"},"type":"kubernetes.io/tls","data":{"tls.crt":"MQ=="}}`, []string{"data[tls.key]"}},
		{"secret sa token", "", "secrets", `{"metadata":{"name":"s","namespace":"d"},"type":"kubernetes.io/service-account-token"}`, []string{"metadata.annotations[kubernetes.io/service-account.name]"}},
		{"secret dockerconfigjson", "", "secrets", `{"metadata":{"name":"s","namespace":"d"},"type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":"bm90IGpzb24="}}`, []string{"data[.dockerconfigjson]"}},
		{"serviceaccount ok", "", "serviceaccounts", `{"metadata":{"name":"sa.x","namespace":"d"},"secrets":[{"name":"t"}]}`, nil},
		{"serviceaccount bad name", "", "serviceaccounts", `{"metadata":{"name":"sa_x","namespace":"d"}}`, []string{"metadata.name"}},
		{"event old-style ok", "", "events", `{"metadata":{"name":"e","namespace":"d"},"involvedObject":{"kind":"Pod","namespace":"d","name":"p"},"reason":"R"}`, nil},
		{"event namespace mismatch", "", "events", `{"metadata":{"name":"e","namespace":"d"},"involvedObject":{"namespace":"other"}}`, []string{"involvedObject.namespace"}},
		{"event new-style missing fields", "", "events", `{"metadata":{"name":"e","namespace":"d"},"involvedObject":{"namespace":"d"},"eventTime":"2025-01-01T00:00:00.000000Z"}`,
			[]string{"action", "reason", "reportingComponent", "reportingInstance"}},
		{"event bad time", "", "events", `{"metadata":{"name":"e","namespace":"d"},"lastTimestamp":"yesterday"}`, []string{"lastTimestamp"}},
		{"events.k8s.io ok", "events.k8s.io", "events", `{"metadata":{"name":"e","namespace":"d"},"regarding":{"namespace":"d"},"eventTime":"2025-01-01T00:00:00.000000Z",
			"type":"Normal","reportingController":"k8s.io/x","reportingInstance":"i","action":"A","reason":"R"}`, nil},
		{"events.k8s.io bad", "events.k8s.io", "events", `{"metadata":{"name":"e","namespace":"d"},"regarding":{"namespace":"d"},"type":"Info","deprecatedCount":2}`,
			[]string{"deprecatedCount", "eventTime", "type"}},
		{"lease ok", "coordination.k8s.io", "leases", `{"metadata":{"name":"l","namespace":"kube-system"},"spec":{"holderIdentity":"me","leaseDurationSeconds":15}}`, nil},
		{"lease bad duration", "coordination.k8s.io", "leases", `{"metadata":{"name":"l","namespace":"d"},"spec":{"leaseDurationSeconds":0}}`, []string{"spec.leaseDurationSeconds"}},
		{"lease duration string", "coordination.k8s.io", "leases", `{"metadata":{"name":"l","namespace":"d"},"spec":{"leaseDurationSeconds":"15"}}`, []string{"spec.leaseDurationSeconds"}},
		{"role ok", "rbac.authorization.k8s.io", "roles", `{"metadata":{"name":"system:r","namespace":"d"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`, nil},
		{"role bad rules", "rbac.authorization.k8s.io", "roles", `{"metadata":{"name":"r","namespace":"d"},"rules":[{"resources":["pods"]},{"verbs":["get"],"nonResourceURLs":["/x"]}]}`,
			[]string{"rules[0].apiGroups", "rules[0].verbs", "rules[1].nonResourceURLs"}},
		{"role name with slash", "rbac.authorization.k8s.io", "roles", `{"metadata":{"name":"a/b","namespace":"d"}}`, []string{"metadata.name"}},
		{"clusterrole aggregation", "rbac.authorization.k8s.io", "clusterroles", `{"metadata":{"name":"agg"},"aggregationRule":{"clusterRoleSelectors":[]}}`,
			[]string{"aggregationRule.clusterRoleSelectors"}},
		{"clusterrole nonresource ok", "rbac.authorization.k8s.io", "clusterroles", `{"metadata":{"name":"c"},"rules":[{"verbs":["get"],"nonResourceURLs":["/healthz"]}]}`, nil},
		{"rolebinding ok", "rbac.authorization.k8s.io", "rolebindings", `{"metadata":{"name":"b","namespace":"d"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},
			"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"u"},{"kind":"ServiceAccount","name":"default","namespace":"d"}]}`, nil},
		{"rolebinding bad", "rbac.authorization.k8s.io", "rolebindings", `{"metadata":{"name":"b","namespace":"d"},"roleRef":{"apiGroup":"x","kind":"Pod"},
			"subjects":[{"kind":"Robot","name":"u"},{"kind":"ServiceAccount","apiGroup":"rbac.authorization.k8s.io"}]}`,
			[]string{"roleRef.apiGroup", "roleRef.kind", "roleRef.name", "subjects[0].kind", "subjects[1].apiGroup", "subjects[1].name"}},
		{"clusterrolebinding sa needs namespace", "rbac.authorization.k8s.io", "clusterrolebindings", `{"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},
			"subjects":[{"kind":"ServiceAccount","name":"x"}]}`, []string{"roleRef.kind", "subjects[0].namespace"}},
		{"crd ok", "apiextensions.k8s.io", "customresourcedefinitions", `{"metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced",
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}`, nil},
		{"crd bad name", "apiextensions.k8s.io", "customresourcedefinitions", `{"metadata":{"name":"widgets"},"spec":{"group":"example.com","names":{"plural":"widgets"}}}`,
			// upstream's apiextensions validation reports every missing part, not only the name
			[]string{"metadata.name", "spec.names.kind", "spec.names.listKind", "spec.names.singular", "spec.scope", "spec.versions", "status.storedVersions"}},
		{"crd schema wrong type", "apiextensions.k8s.io", "customresourcedefinitions", `{"metadata":{"name":"w.e"},"spec":{"group":"e","names":{"plural":"w"},
			"versions":[{"name":"v1","schema":{"openAPIV3Schema":{"type":5}}}]}}`, []string{"spec.versions[0].schema.openAPIV3Schema.type"}},
		{"webhook ok", "admissionregistration.k8s.io", "validatingwebhookconfigurations", `{"metadata":{"name":"w"},"webhooks":[{"name":"a.b.c","clientConfig":{"url":"https://x"},"sideEffects":"None","admissionReviewVersions":["v1"]}]}`, nil},
		{"webhook bad", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", `{"metadata":{"name":"w"},"webhooks":[{"name":"a.b","clientConfig":{},"sideEffects":"Some"},{"name":"a.b","clientConfig":{"url":"https://x"},"sideEffects":"None","admissionReviewVersions":["v1"]}]}`,
			[]string{"webhooks[0].admissionReviewVersions", "webhooks[0].clientConfig", "webhooks[0].name", "webhooks[0].sideEffects", "webhooks[1].name"}},
		{"webhook config bad name", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", `{"metadata":{"name":"W"}}`, []string{"metadata.name"}},
		// upstream's matchConditions rules: a qualified name, an expression that compiles
		{"webhook match conditions", "admissionregistration.k8s.io", "validatingwebhookconfigurations", `{"metadata":{"name":"w"},"webhooks":[{"name":"a.b.c","clientConfig":{"url":"https://x"},"sideEffects":"None","admissionReviewVersions":["v1"],
			"matchConditions":[{"name":"ok","expression":"true"},{"name":"bad name!","expression":"true"},{"name":"syntax","expression":"1 +"},{"name":"not-bool","expression":"'x'"}]}]}`,
			[]string{"webhooks[0].matchConditions[1].name", "webhooks[0].matchConditions[2].expression", "webhooks[0].matchConditions[3].expression"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := builtin(t, tt.group, tt.resource)
			o := obj(t, tt.obj)
			s := k.StrategyOrDefault()
			s.PrepareForCreate(o)
			errs := s.Validate(o)
			got := paths(errs)
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("paths %q, want %q\n%v", got, want, errs.ToAggregate())
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name, group, resource string
		old, obj              string
		want                  []string
	}{
		{"configmap ok", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"},"data":{"a":"1"}}`,
			`{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"},"data":{"a":"2"}}`, nil},
		{"configmap immutable", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"},"immutable":true,"data":{"a":"1"}}`,
			`{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"},"data":{"a":"2"}}`, []string{"data", "immutable"}},
		{"configmap immutable metadata change ok", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"},"immutable":true,"data":{"a":"1"}}`,
			`{"metadata":{"name":"c","namespace":"d","resourceVersion":"1","labels":{"x":"y"}},"immutable":true,"data":{"a":"1"}}`, nil},
		{"configmap rename", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"}}`,
			`{"metadata":{"name":"e","namespace":"d","resourceVersion":"1"}}`, []string{"metadata.name"}},
		{"configmap no resourceVersion", "", "configmaps", `{"metadata":{"name":"c","namespace":"d","resourceVersion":"1"}}`,
			`{"metadata":{"name":"c","namespace":"d"}}`, []string{"metadata.resourceVersion"}},
		{"secret type", "", "secrets", `{"metadata":{"name":"s","namespace":"d","resourceVersion":"1"},"type":"Opaque"}`,
			`{"metadata":{"name":"s","namespace":"d","resourceVersion":"1"},"type":"kubernetes.io/basic-auth","data":{"username":"dQ=="}}`, []string{"type"}},
		{"secret immutable", "", "secrets", `{"metadata":{"name":"s","namespace":"d","resourceVersion":"1"},"type":"Opaque","immutable":true,"data":{"a":"MQ=="}}`,
			`{"metadata":{"name":"s","namespace":"d","resourceVersion":"1"},"stringData":{"a":"2"}}`, []string{"data", "immutable"}},
		{"rolebinding roleRef", "rbac.authorization.k8s.io", "rolebindings", `{"metadata":{"name":"b","namespace":"d","resourceVersion":"1"},"roleRef":{"kind":"Role","name":"r"}}`,
			`{"metadata":{"name":"b","namespace":"d","resourceVersion":"1"},"roleRef":{"kind":"Role","name":"q"}}`, []string{"roleRef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := builtin(t, tt.group, tt.resource)
			s := k.StrategyOrDefault()
			old := obj(t, tt.old)
			s.PrepareForCreate(old)
			o := obj(t, tt.obj)
			s.PrepareForUpdate(o, old)
			errs := s.ValidateUpdate(o, old)
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if got := paths(errs); !reflect.DeepEqual(got, want) {
				t.Errorf("paths %q, want %q\n%v", got, want, errs.ToAggregate())
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	ns := builtin(t, "", "namespaces").StrategyOrDefault()
	o := obj(t, `{"metadata":{"name":"a"},"spec":{"finalizers":["example.com/x"]},"status":{"phase":"Terminating"}}`)
	ns.PrepareForCreate(o)
	if got := str(o, "status", "phase"); got != "Active" {
		t.Errorf("phase %q", got)
	}
	if f, _, _ := unstructuredStrings(o, "spec", "finalizers"); !reflect.DeepEqual(f, []string{"example.com/x", "kubernetes"}) {
		t.Errorf("finalizers %v", f)
	}
	if o.GetLabels()["kubernetes.io/metadata.name"] != "a" {
		t.Errorf("labels %v", o.GetLabels())
	}
	upd := obj(t, `{"metadata":{"name":"a"},"spec":{"finalizers":[]}}`)
	ns.PrepareForUpdate(upd, o)
	if f, _, _ := unstructuredStrings(upd, "spec", "finalizers"); len(f) != 2 {
		t.Errorf("update changed finalizers to %v", f)
	}

	sec := builtin(t, "", "secrets").StrategyOrDefault()
	o = obj(t, `{"metadata":{"name":"s","namespace":"d"},"data":{"a":"MQ==","b":"MQ=="},"stringData":{"b":"two"}}`)
	sec.PrepareForCreate(o)
	if str(o, "type") != "Opaque" || str(o, "data", "b") != "dHdv" || o.Object["stringData"] != nil {
		t.Errorf("secret after prepare %v", o.Object)
	}
	o = obj(t, `{"metadata":{"name":"s","namespace":"d"},"stringData":{"b":2}}`)
	sec.PrepareForCreate(o)
	if got := paths(sec.Validate(o)); !reflect.DeepEqual(got, []string{"stringData[b]"}) {
		t.Errorf("bad stringData: %v", got)
	}

	rb := builtin(t, "rbac.authorization.k8s.io", "clusterrolebindings").StrategyOrDefault()
	o = obj(t, `{"metadata":{"name":"b"},"roleRef":{"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"Group","name":"g"},{"kind":"ServiceAccount","name":"s","namespace":"n"}]}`)
	rb.PrepareForCreate(o)
	if errs := rb.Validate(o); len(errs) > 0 {
		t.Errorf("defaulted binding invalid: %v", errs)
	}
}

func unstructuredStrings(o interface{ UnstructuredContent() map[string]any }, path ...string) ([]string, bool, error) {
	var out []string
	v, _ := o.UnstructuredContent()[path[0]].(map[string]any)
	l, _ := v[path[1]].([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out, l != nil, nil
}
