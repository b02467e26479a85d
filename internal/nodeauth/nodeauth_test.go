package nodeauth

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/apiserver/request"
)

// graphFixture feeds a graph by hand: pod p1 on n1 uses secret s1 (volume), configmap c1
// (envFrom), claim claim1 (bound to pv1, whose CSI driver reads secret pvsecret) and runs
// as sa1; pod p2 on n2 uses secret s2.
func graphFixture(t *testing.T) *Authorizer {
	t.Helper()
	a := New(nil)
	a.Graph().AddPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", UID: "u1"},
		Spec: corev1.PodSpec{
			NodeName:           "n1",
			ServiceAccountName: "sa1",
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim1"}}},
			},
			Containers: []corev1.Container{{Name: "c", Image: "i",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c1"}}}}}},
		},
	})
	a.Graph().AddPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p2", UID: "u2"},
		Spec: corev1.PodSpec{
			NodeName: "n2",
			Volumes:  []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s2"}}}},
		},
	})
	a.Graph().AddPV(&corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "claim1"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h",
				NodePublishSecretRef: &corev1.SecretReference{Namespace: "ns", Name: "pvsecret"}}},
		},
	})
	return a
}

var (
	n1    = &request.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	alice = &request.User{Name: "alice", Groups: []string{"system:authenticated"}}
)

func res(verb, group, resource, ns, name, sub string) *request.Info {
	return &request.Info{IsResourceRequest: true, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: resource, Namespace: ns, Name: name, Subresource: sub}
}

func TestDecisions(t *testing.T) {
	a := graphFixture(t)
	for _, tc := range []struct {
		name   string
		user   *request.User
		info   *request.Info
		sel    Selectors
		allow  bool
		reason string // a substring of the reason when not allowed
	}{
		{name: "own node", user: n1, info: res("get", "", "nodes", "", "n1", ""), allow: true},
		{name: "another node", user: n1, info: res("get", "", "nodes", "", "n2", ""), reason: "node 'n1' cannot read 'n2', only its own Node object"},
		{name: "all nodes", user: n1, info: res("list", "", "nodes", "", "", ""), reason: "node 'n1' cannot read all nodes, only its own Node object"},
		{name: "watch own node by metadata.name", user: n1, info: res("watch", "", "nodes", "", "", ""), sel: Selectors{Field: "metadata.name=n1"}, allow: true},
		{name: "watch another node by metadata.name", user: n1, info: res("watch", "", "nodes", "", "", ""), sel: Selectors{Field: "metadata.name=n2"}, reason: "cannot read 'n2'"},
		{name: "own node status", user: n1, info: res("patch", "", "nodes", "", "n1", "status"), allow: true},
		{name: "delete a node", user: n1, info: res("delete", "", "nodes", "", "n1", "")},
		{name: "secret of its pod", user: n1, info: res("get", "", "secrets", "ns", "s1", ""), allow: true},
		{name: "secret of another node's pod", user: n1, info: res("get", "", "secrets", "ns", "s2", ""), reason: "no relationship found between node 'n1' and this object"},
		{name: "unrelated secret", user: n1, info: res("get", "", "secrets", "ns", "other", ""), reason: "no relationship found"},
		{name: "secret in another namespace", user: n1, info: res("get", "", "secrets", "other", "s1", ""), reason: "no relationship found"},
		{name: "list secrets", user: n1, info: res("list", "", "secrets", "ns", "", ""), reason: "No Object name found"},
		{name: "write a secret it may read", user: n1, info: res("update", "", "secrets", "ns", "s1", ""), reason: "can only read resources of this type"},
		{name: "configmap of its pod", user: n1, info: res("get", "", "configmaps", "ns", "c1", ""), allow: true},
		{name: "claim of its pod", user: n1, info: res("get", "", "persistentvolumeclaims", "ns", "claim1", ""), allow: true},
		{name: "volume of its claim", user: n1, info: res("get", "", "persistentvolumes", "", "pv1", ""), allow: true},
		{name: "secret of its volume", user: n1, info: res("get", "", "secrets", "ns", "pvsecret", ""), allow: true},
		{name: "token of its pod's service account", user: n1, info: res("create", "", "serviceaccounts", "ns", "sa1", "token"), allow: true},
		{name: "token of another service account", user: n1, info: res("create", "", "serviceaccounts", "ns", "default", "token"), reason: "no relationship found"},
		{name: "its pod", user: n1, info: res("get", "", "pods", "ns", "p1", ""), allow: true},
		{name: "another node's pod", user: n1, info: res("get", "", "pods", "ns", "p2", ""), reason: "no relationship found"},
		{name: "pods scoped to itself", user: n1, info: res("watch", "", "pods", "", "", ""), sel: Selectors{Field: "spec.nodeName=n1"}, allow: true},
		{name: "pods scoped to another node", user: n1, info: res("list", "", "pods", "", "", ""), sel: Selectors{Field: "spec.nodeName=n2"}, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "all pods", user: n1, info: res("list", "", "pods", "", "", ""), reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "bad field selector", user: n1, info: res("list", "", "pods", "", "", ""), sel: Selectors{Field: "spec.nodeName"}, reason: "can only list/watch pods"},
		// Upstream's authorizer allows every pod's status; NodeRestriction admission narrows
		// it to the node's own pods.
		{name: "status of its pod", user: n1, info: res("update", "", "pods", "ns", "p1", "status"), allow: true},
		{name: "update a pod", user: n1, info: res("update", "", "pods", "ns", "p1", "")},
		{name: "its lease", user: n1, info: res("update", "coordination.k8s.io", "leases", "kube-node-lease", "n1", ""), allow: true},
		{name: "another node's lease", user: n1, info: res("update", "coordination.k8s.io", "leases", "kube-node-lease", "n2", ""), reason: "can only access node lease with the same name"},
		{name: "static rule: events", user: n1, info: res("create", "", "events", "ns", "", ""), allow: true},
		{name: "static rule: CSRs", user: n1, info: res("create", "certificates.k8s.io", "certificatesigningrequests", "", "", ""), allow: true},
		{name: "not a node", user: alice, info: res("get", "", "secrets", "ns", "s1", "")},
		{name: "node name without the nodes group", user: &request.User{Name: "system:node:n1"}, info: res("get", "", "nodes", "", "n1", "")},
		{name: "nodes group without a node name", user: &request.User{Name: "bob", Groups: []string{"system:nodes"}}, info: res("get", "", "nodes", "", "n1", "")},
		{name: "empty node name", user: &request.User{Name: "system:node:", Groups: []string{"system:nodes"}}, info: res("get", "", "nodes", "", "n1", ""), reason: "unknown node"},
		{name: "non-resource path", user: n1, info: &request.Info{Path: "/metrics", Verb: "get"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := a.Decide(context.Background(), Attributes(tc.user, tc.info, tc.sel))
			if ok != tc.allow {
				t.Fatalf("allowed = %v (reason %q), want %v", ok, reason, tc.allow)
			}
			if !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q, want it to contain %q", reason, tc.reason)
			}
		})
	}
}

func TestAttributes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		info      *request.Info
		sel       Selectors
		wantName  string
		fieldReqs int
		fieldErr  bool
		labelReqs int
		labelErr  bool
	}{
		{name: "get keeps its name", info: res("get", "", "pods", "ns", "p", ""), sel: Selectors{Field: "metadata.name=q"}, wantName: "p"},
		{name: "list named by metadata.name", info: res("list", "", "nodes", "", "", ""), sel: Selectors{Field: "metadata.name=n1"}, wantName: "n1", fieldReqs: 1},
		{name: "deletecollection is not named", info: res("deletecollection", "", "pods", "ns", "", ""), sel: Selectors{Field: "metadata.name=p"}, fieldReqs: 1},
		{name: "not an exact match", info: res("list", "", "nodes", "", "", ""), sel: Selectors{Field: "metadata.name!=n1"}, fieldReqs: 1},
		{name: "a name no path could carry", info: res("list", "", "nodes", "", "", ""), sel: Selectors{Field: "metadata.name=a/b"}, fieldReqs: 1},
		{name: "bad field selector", info: res("list", "", "pods", "", "", ""), sel: Selectors{Field: "spec.nodeName"}, fieldErr: true},
		{name: "labels", info: res("watch", "", "pods", "", "", ""), sel: Selectors{Label: "a=b,c"}, labelReqs: 2},
		{name: "bad label selector", info: res("watch", "", "pods", "", "", ""), sel: Selectors{Label: "a=(b"}, labelErr: true},
		{name: "selectors ignored for get", info: res("get", "", "pods", "ns", "p", ""), sel: Selectors{Field: "x=y", Label: "a=b"}, wantName: "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Attributes(n1, tc.info, tc.sel)
			if a.Name != tc.wantName || len(a.FieldSelectorRequirements) != tc.fieldReqs || (a.FieldSelectorParsingErr != nil) != tc.fieldErr ||
				len(a.LabelSelectorRequirements) != tc.labelReqs || (a.LabelSelectorParsingErr != nil) != tc.labelErr {
				t.Fatalf("got name %q, %d field requirements (err %v), %d label requirements (err %v)", a.Name,
					len(a.FieldSelectorRequirements), a.FieldSelectorParsingErr, len(a.LabelSelectorRequirements), a.LabelSelectorParsingErr)
			}
			if a.GetUser().GetName() != n1.Name || a.Verb != tc.info.Verb || a.Resource != tc.info.Resource {
				t.Fatalf("request fields not carried: %+v", a)
			}
		})
	}
}

type fixed struct {
	ok     bool
	reason string
}

func (f fixed) Authorize(context.Context, *request.User, *request.Info) (bool, string) {
	return f.ok, f.reason
}

func TestUnion(t *testing.T) {
	info := res("get", "", "nodes", "", "n2", "")
	for _, tc := range []struct {
		name   string
		union  Union
		allow  bool
		reason string
	}{
		{name: "first allows", union: Union{{"node", fixed{true, ""}}, {"rbac", fixed{false, "never asked"}}}, allow: true},
		{name: "second allows", union: Union{{"node", fixed{false, "no"}}, {"rbac", fixed{true, "RBAC: allowed"}}}, allow: true, reason: "RBAC: allowed"},
		{name: "none allows", union: Union{{"node", fixed{false, "no relationship"}}, {"rbac", fixed{false, ""}}}, reason: "node: no relationship"},
		{name: "reasons joined", union: Union{{"node", fixed{false, "a"}}, {"rbac", fixed{false, "b"}}}, reason: "node: a\nrbac: b"},
		{name: "empty", union: Union{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := tc.union.Authorize(context.Background(), n1, info)
			if ok != tc.allow || reason != tc.reason {
				t.Fatalf("got %v %q, want %v %q", ok, reason, tc.allow, tc.reason)
			}
		})
	}
}

func TestNodeWithRealAuthorizerInUnion(t *testing.T) {
	a := graphFixture(t)
	u := Union{{Name, a}, {"rbac", fixed{false, ""}}}
	ok, reason := u.Authorize(context.Background(), n1, res("get", "", "nodes", "", "n2", ""))
	if ok || reason != "node: node 'n1' cannot read 'n2', only its own Node object" {
		t.Fatalf("got %v %q", ok, reason)
	}
	if ok, _ := u.Authorize(context.Background(), n1, res("get", "", "secrets", "ns", "s1", "")); !ok {
		t.Fatal("node n1 may not read the secret of its pod")
	}
}
