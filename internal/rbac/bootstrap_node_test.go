package rbac

import "testing"

// TestNodeBootstrapPolicy: the bootstrap policy lets a bootstrap token create CSRs and
// have node client CSRs approved, lets a node have its own renewals approved, and grants
// nodes nothing through RBAC (system:node is bound to no one; the Node authorizer decides),
// and gives the networking view (kube:node-networking: Services, EndpointSlices, Pods,
// Namespaces, NetworkPolicies) only to agents that also carry NodeNetworkingGroup.
func TestNodeBootstrapPolicy(t *testing.T) {
	s := Build(nil, BootstrapClusterRoles(), nil, BootstrapClusterRoleBindings())
	bootstrapper := []string{NodeBootstrapperGroup, "system:authenticated"}
	node := []string{"system:nodes", "system:authenticated"}
	netNode := []string{"system:nodes", NodeNetworkingGroup, "system:authenticated"}
	for _, c := range []struct {
		name                       string
		user                       string
		groups                     []string
		verb, group, resource, sub string
		want                       bool
	}{
		{"bootstrapper creates a CSR", "system:bootstrap:abc", bootstrapper, "create", "certificates.k8s.io", "certificatesigningrequests", "", true},
		{"bootstrapper watches CSRs", "system:bootstrap:abc", bootstrapper, "watch", "certificates.k8s.io", "certificatesigningrequests", "", true},
		{"bootstrapper's node client CSR", "system:bootstrap:abc", bootstrapper, "create", "certificates.k8s.io", "certificatesigningrequests", "nodeclient", true},
		{"bootstrapper's self node client CSR", "system:bootstrap:abc", bootstrapper, "create", "certificates.k8s.io", "certificatesigningrequests", "selfnodeclient", false},
		{"node's renewal", "system:node:n1", node, "create", "certificates.k8s.io", "certificatesigningrequests", "selfnodeclient", true},
		{"node's client CSR for another", "system:node:n1", node, "create", "certificates.k8s.io", "certificatesigningrequests", "nodeclient", false},
		{"node reads secrets through RBAC", "system:node:n1", node, "get", "", "secrets", "", false},
		{"node reads nodes through RBAC", "system:node:n1", node, "get", "", "nodes", "", false},
		{"networking node watches endpointslices", "system:node:n1", netNode, "watch", "discovery.k8s.io", "endpointslices", "", true},
		{"networking node lists networkpolicies", "system:node:n1", netNode, "list", "networking.k8s.io", "networkpolicies", "", true},
		{"networking node lists all pods", "system:node:n1", netNode, "list", "", "pods", "", true},
		{"plain node lists all pods through RBAC", "system:node:n1", node, "list", "", "pods", "", false},
		{"plain node watches endpointslices through RBAC", "system:node:n1", node, "watch", "discovery.k8s.io", "endpointslices", "", false},
		{"networking node deletes pods", "system:node:n1", netNode, "delete", "", "pods", "", false},
		{"networking node writes services", "system:node:n1", netNode, "update", "", "services", "", false},
		{"bootstrapper lists pods", "system:bootstrap:abc", bootstrapper, "list", "", "pods", "", false},
		{"bootstrapper approves", "system:bootstrap:abc", bootstrapper, "update", "certificates.k8s.io", "certificatesigningrequests", "approval", false},
	} {
		a := &Attributes{User: c.user, Groups: c.groups, ResourceRequest: true, Verb: c.verb, APIGroup: c.group, Resource: c.resource, Subresource: c.sub}
		if got := s.Allows(a); got != c.want {
			t.Errorf("%s: Allows = %v, want %v", c.name, got, c.want)
		}
	}
	names := map[string]bool{}
	for _, r := range BootstrapClusterRoles() {
		if names[r.Name] {
			t.Errorf("ClusterRole %s twice", r.Name)
		}
		names[r.Name] = true
	}
	for _, want := range []string{"system:node", "system:node-bootstrapper", "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
		"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"} {
		if !names[want] {
			t.Errorf("no ClusterRole %s", want)
		}
	}
}
