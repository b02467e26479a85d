package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// Groups and identities the bootstrap policy binds.
const (
	// ControllersGroup is the group of Kube's in-process controllers (their loopback client
	// certificates carry it). It is bound to cluster-admin: the controllers are part of the
	// control plane, as trusted as the API server itself; per-controller roles can narrow
	// this later without changing the identities.
	ControllersGroup = "system:kube-controllers"
)

// BootstrapClusterRoles are kube-apiserver's default ClusterRoles, upstream's own
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy): cluster-admin; admin, edit and view
// aggregated from the system:aggregate-to-* roles; the discovery, basic-user and
// public-info-viewer roles; the roles of the control-plane components (system:kube-scheduler,
// system:kube-controller-manager, system:node, system:volume-scheduler, ...) and of each
// kube-controller-manager controller (system:controller:*), which the real
// kube-controller-manager and kube-scheduler need when they run against Kube.
func BootstrapClusterRoles() []*rbacv1.ClusterRole {
	var out []*rbacv1.ClusterRole
	for _, r := range append(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()...) {
		out = append(out, r.DeepCopy())
	}
	return append(out, nodeClusterRoles()...)
}

// BootstrapNamespaceRoles are upstream's default Roles and RoleBindings in kube-system and
// kube-public (leader locking of the scheduler and controller manager, the
// extension-apiserver-authentication reader, the cluster-info reader).
func BootstrapNamespaceRoles() (map[string][]rbacv1.Role, map[string][]rbacv1.RoleBinding) {
	return bootstrappolicy.NamespaceRoles(), bootstrappolicy.NamespaceRoleBindings()
}

// --- nodes and node certificates (issue 13 item 7 and CSR signing) ---

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
		clusterBinding("kube:node-bootstrapper", "system:node-bootstrapper", NodeBootstrapperGroup),
		clusterBinding("kube:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", NodeBootstrapperGroup),
		clusterBinding("kube:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
		clusterBinding(NodeNetworkingRole, NodeNetworkingRole, NodeNetworkingGroup),
		clusterBinding(NodeGatewayRole, NodeGatewayRole, NodeGatewayGroup),
	}
}

// NodeNetworkingRole is what a node agent's Service proxy, cluster DNS and NetworkPolicy
// enforcement read (the rights upstream gives kube-proxy as system:node-proxier and a CNI
// agent such as Calico's through its own service account): Services, Endpoints,
// EndpointSlices, Namespaces, Pods and NetworkPolicies of the whole cluster, read-only.
// It is bound to NodeNetworkingGroup, not to system:nodes: reading every pod would undo the
// Node authorizer's isolation (a node reads only its own pods), so only agents whose
// credential also carries that group (the in-process agent's; an admin-issued one for a
// joined machine) enforce NetworkPolicy.
const (
	NodeNetworkingRole  = "kube:node-networking"
	NodeNetworkingGroup = "kubeos.dev:node-networking"
)

// NodeGatewayRole is what a node agent's Route gateway reads beyond NodeNetworkingRole: the
// TLS Secrets of the Certificates its Routes name, cluster-wide. That widens access to
// Secrets, so it is a role of its own, bound to NodeGatewayGroup, which only the credentials
// of agents that run the gateway carry (the in-process agent's when --agent-gateway is on).
const (
	NodeGatewayRole  = "kube:node-gateway"
	NodeGatewayGroup = "kubeos.dev:node-gateway"
)

func nodeClusterRoles() []*rbacv1.ClusterRole {
	return []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: NodeNetworkingRole, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"},
			Annotations: map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "namespaces", "pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
			// The Route gateway's routing table and canary weights.
			{APIGroups: []string{"kubeos.dev"}, Resources: []string{"routes", "releases"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: NodeGatewayRole, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"},
			Annotations: map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		},
	}}
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

// BootstrapClusterRoleBindings are upstream's default bindings (cluster-admin to
// system:masters, discovery and self-review to every authenticated user, the
// control-plane components' and controllers' roles to their identities, system:node
// without subjects since the Node authorizer decides for nodes), plus Kube's own:
// cluster-admin to Kube's in-process controllers (ControllersGroup) and the node
// bootstrap bindings.
func BootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	var out []*rbacv1.ClusterRoleBinding
	for _, b := range append(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings()...) {
		out = append(out, b.DeepCopy())
	}
	out = append(out, clusterBinding("system:kube-controllers", "cluster-admin", ControllersGroup))
	return append(out, nodeClusterRoleBindings()...)
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
	roles, bindings := BootstrapNamespaceRoles()
	for ns, rs := range roles {
		for _, r := range rs {
			if _, err := cs.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("bootstrap role %s/%s: %w", ns, r.Name, err)
			}
		}
	}
	for ns, bs := range bindings {
		for _, b := range bs {
			if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("bootstrap rolebinding %s/%s: %w", ns, b.Name, err)
			}
		}
	}
	return nil
}
