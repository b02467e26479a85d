package nodeauth

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/apiserver/request"
)

// rbacSays is a review hook that answers like RBAC: status.allowed and status.reason as
// given, the spec as sent.
func rbacSays(allowed bool, reason string) Hook {
	return func(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		out := obj.DeepCopy()
		st := map[string]any{"allowed": allowed}
		if reason != "" {
			st["reason"] = reason
		}
		out.Object["status"] = st
		return out, nil
	}
}

func sar(user string, groups []string, resource, namespace, name string) *unstructured.Unstructured {
	gs := []any{}
	for _, g := range groups {
		gs = append(gs, g)
	}
	spec := map[string]any{"resourceAttributes": map[string]any{"verb": "get", "version": "v1", "resource": resource, "namespace": namespace, "name": name}}
	if user != "" {
		spec["user"], spec["groups"] = user, gs
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}}
}

func TestReview(t *testing.T) {
	a := graphFixture(t)
	nodeGroups := []string{"system:nodes"}
	for _, tc := range []struct {
		name    string
		self    bool
		ctxUser *request.User
		rbac    Hook
		obj     *unstructured.Unstructured
		allowed bool
		reason  string
	}{
		{name: "RBAC allows", rbac: rbacSays(true, "RBAC: allowed"), obj: sar("system:node:n1", nodeGroups, "secrets", "ns", "s2"), allowed: true, reason: "RBAC: allowed"},
		{name: "node allows what RBAC does not", rbac: rbacSays(false, ""), obj: sar("system:node:n1", nodeGroups, "secrets", "ns", "s1"), allowed: true},
		{name: "neither allows", rbac: rbacSays(false, ""), obj: sar("system:node:n1", nodeGroups, "secrets", "ns", "s2"),
			reason: "node: no relationship found between node 'n1' and this object"},
		{name: "neither allows, RBAC's reason kept", rbac: rbacSays(false, "RBAC: x"), obj: sar("system:node:n1", nodeGroups, "nodes", "", "n2"),
			reason: "node: node 'n1' cannot read 'n2', only its own Node object\nRBAC: x"},
		{name: "not a node", rbac: rbacSays(false, ""), obj: sar("alice", nil, "secrets", "ns", "s1")},
		{name: "self: the requester is the node", self: true, ctxUser: n1, rbac: rbacSays(false, ""), obj: sar("", nil, "secrets", "ns", "s1"), allowed: true},
		{name: "self: the requester is not", self: true, ctxUser: alice, rbac: rbacSays(false, ""), obj: sar("", nil, "secrets", "ns", "s1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := a.Review(tc.rbac)
			if tc.self {
				hook = a.SelfReview(tc.rbac)
			}
			ctx := context.Background()
			if tc.ctxUser != nil {
				ctx = request.WithUser(ctx, tc.ctxUser)
			}
			out, err := hook(ctx, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			allowed, _, _ := unstructured.NestedBool(out.Object, "status", "allowed")
			reason, _, _ := unstructured.NestedString(out.Object, "status", "reason")
			if allowed != tc.allowed || reason != tc.reason {
				t.Fatalf("allowed %v reason %q, want %v %q", allowed, reason, tc.allowed, tc.reason)
			}
		})
	}
	if _, err := a.SelfReview(rbacSays(false, ""))(context.Background(), sar("", nil, "secrets", "ns", "s1")); err == nil {
		t.Fatal("a self review without a user in the context answered")
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"user": int64(3)}}}
	if _, err := a.Review(rbacSays(false, ""))(context.Background(), bad); err == nil {
		t.Fatal("a malformed spec was answered")
	}
}

func TestSelfRulesReview(t *testing.T) {
	a := New(nil)
	rules := func(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		out := obj.DeepCopy()
		out.Object["status"] = map[string]any{"resourceRules": []any{}, "nonResourceRules": []any{}, "incomplete": false}
		return out, nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"namespace": "ns"}}}
	for _, tc := range []struct {
		user       *request.User
		incomplete bool
		evalErr    string
	}{
		{n1, true, "node authorizer does not support user rule resolution"},
		{alice, false, ""},
	} {
		out, err := a.SelfRulesReview(rules)(request.WithUser(context.Background(), tc.user), obj)
		if err != nil {
			t.Fatal(err)
		}
		inc, _, _ := unstructured.NestedBool(out.Object, "status", "incomplete")
		ev, _, _ := unstructured.NestedString(out.Object, "status", "evaluationError")
		if inc != tc.incomplete || ev != tc.evalErr {
			t.Fatalf("%s: incomplete %v evaluationError %q, want %v %q", tc.user.Name, inc, ev, tc.incomplete, tc.evalErr)
		}
	}
}
