package security

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKubectlSession is the "Done when" session, with each supported kubectl: the
// admin creates a namespace, a user alice (kube certs user) who holds edit there through a
// RoleBinding, and a ServiceAccount; alice's can-i matrix, whoami, --as, and a service
// account token that works until the ServiceAccount is deleted.
func TestKubectlSession(t *testing.T) {
	securitySuite.Need(t)
	for _, v := range []string{"1.27", "1.33"} {
		t.Run("kubectl-"+v, func(t *testing.T) { session(t, v) })
	}
}

func session(t *testing.T, version string) {
	k := kubectl{bin: findKubectl(t, version), home: t.TempDir()}
	admin := srv.Kubeconfig
	ns := "team-" + strings.ReplaceAll(version, ".", "-")
	user := "alice-" + strings.ReplaceAll(version, ".", "-")
	k.ok(t, admin, "create", "namespace", ns)
	alice := certsUser(t, user, "developers")
	k.ok(t, admin, "create", "rolebinding", user+"-edit", "--clusterrole=edit", "--user="+user, "-n", ns)

	// whoami, as both users.
	if out := k.ok(t, admin, "auth", "whoami"); !strings.Contains(out, "kube-admin") || !strings.Contains(out, "system:masters") {
		t.Errorf("admin whoami:\n%s", out)
	}
	out := k.ok(t, alice, "auth", "whoami")
	if !strings.Contains(out, user) || !strings.Contains(out, "developers") || !strings.Contains(out, "system:authenticated") {
		t.Errorf("%s whoami:\n%s", user, out)
	}

	// The can-i matrix of upstream's edit role, bound in one namespace.
	eventually(t, 10*time.Second, func() error {
		if o, _, _ := k.run(t, alice, "auth", "can-i", "create", "configmaps", "-n", ns); strings.TrimSpace(o) != "yes" {
			return fmt.Errorf("the RoleBinding is not in effect yet")
		}
		return nil
	})
	matrix := []struct {
		args []string
		want string
	}{
		{[]string{"create", "configmaps", "-n", ns}, "yes"},
		{[]string{"delete", "configmaps", "-n", ns}, "yes"},
		{[]string{"get", "secrets", "-n", ns}, "yes"},
		{[]string{"create", "secrets", "-n", ns}, "yes"},
		{[]string{"create", "serviceaccounts/token", "-n", ns}, "yes"},
		{[]string{"impersonate", "serviceaccounts", "-n", ns}, "yes"},
		{[]string{"create", "configmaps", "-n", "default"}, "no"},
		{[]string{"get", "secrets", "-n", "default"}, "no"},
		{[]string{"create", "roles.rbac.authorization.k8s.io", "-n", ns}, "no"},
		{[]string{"create", "rolebindings.rbac.authorization.k8s.io", "-n", ns}, "no"},
		{[]string{"create", "namespaces"}, "no"},
		{[]string{"create", "clusterroles.rbac.authorization.k8s.io"}, "no"},
		{[]string{"impersonate", "users"}, "no"},
	}
	for _, m := range matrix {
		o, _, _ := k.run(t, alice, append([]string{"auth", "can-i"}, m.args...)...)
		if got := strings.TrimSpace(o); got != m.want {
			t.Errorf("%s: can-i %s = %q, want %q", user, strings.Join(m.args, " "), got, m.want)
		}
	}
	if o, _, _ := k.run(t, admin, "auth", "can-i", "delete", "clusterroles.rbac.authorization.k8s.io"); strings.TrimSpace(o) != "yes" {
		t.Errorf("admin: can-i delete clusterroles = %q, want yes", o)
	}
	list := k.ok(t, alice, "auth", "can-i", "--list", "-n", ns)
	for _, want := range []string{"configmaps", "secrets", "selfsubjectaccessreviews.authorization.k8s.io"} {
		if !strings.Contains(list, want) {
			t.Errorf("can-i --list lacks %s:\n%s", want, list)
		}
	}

	// Using the rights: edit works in the namespace, nothing works elsewhere.
	k.ok(t, alice, "create", "configmap", "c1", "-n", ns, "--from-literal=a=b")
	k.fails(t, alice, fmt.Sprintf(`configmaps is forbidden: User %q cannot list resource "configmaps" in API group "" in the namespace "default"`, user),
		"get", "configmaps", "-n", "default")

	// --as: the admin may impersonate, the user may not.
	if o := k.ok(t, admin, "auth", "whoami", "--as", user, "--as-group", "developers"); !strings.Contains(o, user) {
		t.Errorf("admin whoami --as %s:\n%s", user, o)
	}
	k.ok(t, admin, "get", "configmaps", "-n", ns, "--as", user)
	k.fails(t, admin, fmt.Sprintf(`configmaps is forbidden: User %q cannot list resource "configmaps" in API group "" in the namespace "default"`, user),
		"get", "configmaps", "-n", "default", "--as", user)
	k.fails(t, alice, fmt.Sprintf(`users "bob" is forbidden: User %q cannot impersonate resource "users" in API group "" at the cluster scope`, user),
		"get", "configmaps", "-n", ns, "--as", "bob")

	// A service account token works until the ServiceAccount is deleted, and up to 10 s after
	// (the token cache, as kube-apiserver's).
	k.ok(t, admin, "create", "serviceaccount", "robot", "-n", ns)
	k.ok(t, admin, "create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount="+ns+":robot", "-n", ns)
	token := strings.TrimSpace(k.ok(t, alice, "create", "token", "robot", "-n", ns))
	if strings.Count(token, ".") != 2 {
		t.Fatalf("create token printed %q, want a JWT", token)
	}
	withToken := func(args ...string) []string {
		return append([]string{"--token", token}, args...)
	}
	bare := bareKubeconfig(t)
	o := k.ok(t, bare, withToken("auth", "whoami")...)
	if !strings.Contains(o, "system:serviceaccount:"+ns+":robot") || !strings.Contains(o, "system:serviceaccounts:"+ns) {
		t.Errorf("whoami with the token:\n%s", o)
	}
	eventually(t, 10*time.Second, func() error {
		_, e, err := k.run(t, bare, withToken("get", "configmaps", "-n", ns)...)
		if err != nil {
			return fmt.Errorf("get configmaps with the token: %s", e)
		}
		return nil
	})
	k.ok(t, admin, "delete", "serviceaccount", "robot", "-n", ns)
	eventually(t, time.Minute, func() error {
		if _, e, err := k.run(t, bare, withToken("get", "configmaps", "-n", ns)...); err == nil || !strings.Contains(e, "You must be logged in to the server (Unauthorized)") {
			return fmt.Errorf("get configmaps with the deleted ServiceAccount's token: %v %s", err, e)
		}
		return nil
	})

	// A re-created ServiceAccount of the same name does not revive the old token.
	k.ok(t, admin, "create", "serviceaccount", "robot", "-n", ns)
	k.fails(t, bare, "You must be logged in to the server (Unauthorized)", withToken("get", "configmaps", "-n", ns)...)

}
