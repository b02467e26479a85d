package audit

import (
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kubeos.dev/kube/internal/apiserver/request"
)

const policyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/status", "*/scale"]
- level: Request
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["special"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "configmaps"]
- level: Request
  userGroups: ["system:serviceaccounts"]
  namespaces: ["kube-system"]
  omitStages: [ResponseStarted]
- level: Metadata
`

func TestDecide(t *testing.T) {
	p, err := ParsePolicy([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	res := func(verb, group, resource, sub, ns, name string) *request.Info {
		return &request.Info{IsResourceRequest: true, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	admin := &request.User{Name: "admin", Groups: []string{"system:masters"}}
	proxy := &request.User{Name: "system:kube-proxy"}
	sa := &request.User{Name: "system:serviceaccount:kube-system:x", Groups: []string{"system:serviceaccounts"}}
	for _, c := range []struct {
		name string
		u    *request.User
		info *request.Info
		want auditv1.Level
		omit []auditv1.Stage
	}{
		{"proxy watch", proxy, res("watch", "", "pods", "", "", ""), auditv1.LevelNone, nil},
		{"proxy get", proxy, res("get", "", "pods", "", "a", "p"), auditv1.LevelMetadata, nil},
		{"healthz prefix", admin, &request.Info{Path: "/healthz/etcd", Verb: "get"}, auditv1.LevelNone, nil},
		{"version", admin, &request.Info{Path: "/version", Verb: "get"}, auditv1.LevelNone, nil},
		{"pod status", admin, res("update", "", "pods", "status", "a", "p"), auditv1.LevelRequestResponse, nil},
		{"pod itself", admin, res("update", "", "pods", "", "a", "p"), auditv1.LevelMetadata, nil},
		{"any scale", admin, res("update", "", "replicationcontrollers", "scale", "a", "r"), auditv1.LevelRequestResponse, nil},
		{"apps scale is another group", admin, res("update", "apps", "deployments", "scale", "a", "d"), auditv1.LevelMetadata, nil},
		{"resource name", admin, res("get", "", "configmaps", "", "a", "special"), auditv1.LevelRequest, nil},
		{"other name", admin, res("get", "", "configmaps", "", "a", "plain"), auditv1.LevelMetadata, nil},
		{"sa in kube-system", sa, res("get", "", "pods", "", "kube-system", "p"), auditv1.LevelRequest, []auditv1.Stage{auditv1.StageResponseStarted}},
		{"sa elsewhere", sa, res("get", "", "pods", "", "default", "p"), auditv1.LevelMetadata, nil},
		{"anonymous", nil, &request.Info{Path: "/apis", Verb: "get"}, auditv1.LevelMetadata, nil},
	} {
		d := p.Decide(c.u, c.info)
		if d.Level != c.want {
			t.Errorf("%s: level %s, want %s", c.name, d.Level, c.want)
		}
		if !d.Omits(auditv1.StageRequestReceived) && d.Level != auditv1.LevelNone {
			t.Errorf("%s: the policy-wide omitStages is lost: %v", c.name, d.OmitStages)
		}
		for _, s := range c.omit {
			if !d.Omits(s) {
				t.Errorf("%s: %s not omitted", c.name, s)
			}
		}
	}
	if (*Policy)(nil).Decide(admin, res("get", "", "pods", "", "", "")).Level != auditv1.LevelNone {
		t.Error("nil policy logs")
	}
}

func TestBadPolicies(t *testing.T) {
	for name, y := range map[string]string{
		"kind":          "apiVersion: v1\nkind: Pod\nrules: [{level: None}]",
		"no rules":      "apiVersion: audit.k8s.io/v1\nkind: Policy\n",
		"bad level":     "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]",
		"bad stage":     "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Never]\nrules: [{level: None}]",
		"unknown field": "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, user: [x]}]",
		"mixed":         "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/x], namespaces: [a]}]",
		"not yaml":      "{{{",
	} {
		if _, err := ParsePolicy([]byte(y)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
