package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"kubeos.dev/kube/internal/apiserver/filters"
)

// Groups and identities the bootstrap policy binds.
const (
	// ControllersGroup is the group of Kube's in-process controllers (their loopback client
	// certificates carry it). It is bound to cluster-admin: the controllers are part of the
	// control plane, as trusted as the API server itself; per-controller roles can narrow
	// this later without changing the identities.
	ControllersGroup = "system:kube-controllers"

	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = append(append([]string{}, read...), write...)
)

func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: resources}
}

func urls(verbs []string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: paths}
}

func clusterRole(name string, labels map[string]string, agg string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	l := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	for k, v := range labels {
		l[k] = v
	}
	r := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		Rules:      rules,
	}
	if agg != "" {
		r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{agg: "true"}}}}
	}
	return r
}

// BootstrapClusterRoles are upstream's default ClusterRoles (plugin/pkg/auth/authorizer/rbac/
// bootstrappolicy): cluster-admin; admin, edit and view, aggregated from the
// system:aggregate-to-* roles (view aggregates into edit, edit into admin); the discovery and
// self-review roles every authenticated user holds.
func BootstrapClusterRoles() []*rbacv1.ClusterRole {
	const core, apps, autoscaling, batch, extensions, policy, networking, discovery, coordination = "", "apps", "autoscaling", "batch", "extensions", "policy", "networking.k8s.io", "discovery.k8s.io", "coordination.k8s.io"
	return append([]*rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil, "",
			rule([]string{"*"}, "*", "*"),
			urls([]string{"*"}, "*")),
		clusterRole("admin", nil, aggregateToAdmin),
		clusterRole("edit", map[string]string{aggregateToAdmin: "true"}, aggregateToEdit),
		clusterRole("view", map[string]string{aggregateToEdit: "true"}, aggregateToView),
		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"}, "",
			rule([]string{"create"}, "authorization.k8s.io", "localsubjectaccessreviews"),
			rule(readWrite, rbacv1.GroupName, "roles", "rolebindings")),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"}, "",
			rule(read, core, "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
			rule([]string{"impersonate"}, core, "serviceaccounts"),
			rule(write, core, "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
			rule([]string{"create"}, core, "pods/eviction"),
			rule(write, core, "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
			rule([]string{"create"}, core, "serviceaccounts/token"),
			rule(write, apps, "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
				"deployments/rollback", "replicasets", "replicasets/scale"),
			rule(write, autoscaling, "horizontalpodautoscalers"),
			rule(write, batch, "jobs", "cronjobs"),
			rule(write, extensions, "daemonsets", "deployments", "deployments/scale", "deployments/rollback", "ingresses",
				"replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
			rule(write, policy, "poddisruptionbudgets"),
			rule(write, networking, "networkpolicies", "ingresses"),
			rule(readWrite, coordination, "leases")),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToView: "true"}, "",
			rule(read, core, "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
			rule(read, core, "limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
				"namespaces/status", "replicationcontrollers/status", "pods/log"),
			rule(read, core, "namespaces"),
			rule(read, discovery, "endpointslices"),
			rule(read, apps, "controllerrevisions", "statefulsets", "statefulsets/scale", "statefulsets/status",
				"daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
				"replicasets", "replicasets/scale", "replicasets/status"),
			rule(read, autoscaling, "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(read, batch, "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
			rule(read, extensions, "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
				"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
				"networkpolicies"),
			rule(read, policy, "poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(read, networking, "networkpolicies", "ingresses", "ingresses/status")),
		clusterRole("system:basic-user", nil, "",
			rule([]string{"create"}, "authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule([]string{"create"}, "authentication.k8s.io", "selfsubjectreviews")),
		clusterRole("system:discovery", nil, "",
			urls([]string{"get"}, "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/")),
		clusterRole("system:public-info-viewer", nil, "",
			urls([]string{"get"}, "/healthz", "/livez", "/readyz", "/version", "/version/")),
	}, nodeClusterRoles()...)
}

// --- nodes and node certificates (issue 13 item 7 and CSR signing) ---

// nodeRoleNames are upstream's bootstrap ClusterRoles for nodes and their certificates,
// taken as kube-apiserver creates them (bootstrappolicy.ClusterRoles): system:node (not
// bound: nodes are authorized by the Node authorizer, internal/nodeauth), the
// node-bootstrapper role (create and watch CSRs), the nodeclient and selfnodeclient roles
// the CSR approver checks (internal/controllers/certificates), and the approver roles of
// the kubernetes.io signers.
var nodeRoleNames = map[string]bool{
	"system:node":              true,
	"system:node-bootstrapper": true,
	"system:certificates.k8s.io:certificatesigningrequests:nodeclient":     true,
	"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient": true,
	"system:certificates.k8s.io:kubelet-serving-approver":                  true,
	"system:certificates.k8s.io:kube-apiserver-client-approver":            true,
	"system:certificates.k8s.io:kube-apiserver-client-kubelet-approver":    true,
}

func nodeClusterRoles() []*rbacv1.ClusterRole {
	var out []*rbacv1.ClusterRole
	for _, r := range bootstrappolicy.ClusterRoles() {
		if nodeRoleNames[r.Name] {
			out = append(out, r.DeepCopy())
		}
	}
	return out
}

// NodeBootstrapperGroup is the group of bootstrap tokens (upstream's
// system:bootstrappers), the identity a node agent holds before it has a certificate.
const NodeBootstrapperGroup = "system:bootstrappers"

// nodeClusterRoleBindings: upstream's system:node binding without subjects (kube-apiserver
// keeps it empty since the Node authorizer), and the bindings an installer adds so that
// nodes bootstrap themselves, as kubeadm's kubelet-bootstrap and node-autoapprove-*
// bindings: bootstrappers may create CSRs and have node client CSRs approved, nodes have
// the renewals of their own client certificates approved.
func nodeClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	return []*rbacv1.ClusterRoleBinding{
		clusterBinding("system:node", "system:node"),
		clusterBinding("kube:node-bootstrapper", "system:node-bootstrapper", NodeBootstrapperGroup),
		clusterBinding("kube:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", NodeBootstrapperGroup),
		clusterBinding("kube:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
	}
}

// --- end nodes and node certificates ---

func clusterBinding(name, role string, groups ...string) *rbacv1.ClusterRoleBinding {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"},
			Annotations: map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
	}
	for _, g := range groups {
		b.Subjects = append(b.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: g})
	}
	return b
}

// BootstrapClusterRoleBindings bind the default roles: cluster-admin to system:masters,
// the discovery and self-review roles to every authenticated user, and cluster-admin to
// Kube's controllers (ControllersGroup).
func BootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	return append([]*rbacv1.ClusterRoleBinding{
		clusterBinding("cluster-admin", "cluster-admin", filters.MastersGroup),
		clusterBinding("system:basic-user", "system:basic-user", "system:authenticated"),
		clusterBinding("system:discovery", "system:discovery", "system:authenticated"),
		clusterBinding("system:public-info-viewer", "system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
		clusterBinding("system:kube-controllers", "cluster-admin", ControllersGroup),
	}, nodeClusterRoleBindings()...)
}

// EnsureBootstrapPolicy creates the bootstrap ClusterRoles and ClusterRoleBindings that do
// not exist yet, through the API. Existing ones are left as they are (an operator may have
// changed them); the aggregation controller fills the aggregated roles' rules.
func EnsureBootstrapPolicy(ctx context.Context, cs kubernetes.Interface) error {
	for _, r := range BootstrapClusterRoles() {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap clusterrole %s: %w", r.Name, err)
		}
	}
	for _, b := range BootstrapClusterRoleBindings() {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap clusterrolebinding %s: %w", b.Name, err)
		}
	}
	return nil
}
