package platform

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func TestDatabaseName(t *testing.T) {
	long := strings.Repeat("x", 60)
	for _, c := range []struct{ ns, name, spec, want string }{
		{"acme-dev", "orders", "", "acme_dev_orders"},
		{"acme-dev", "orders.v2", "", "acme_dev_orders_v2"},
		{"acme-dev", "orders", "shop", "shop"},
	} {
		db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}, Spec: v1alpha1.DatabaseSpec{DatabaseName: c.spec}}
		if got := DatabaseName(db); got != c.want {
			t.Errorf("DatabaseName(%s/%s, %q) = %q, want %q", c.ns, c.name, c.spec, got, c.want)
		}
	}
	a := DatabaseName(&v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: long + "a"}})
	b := DatabaseName(&v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: long + "b"}})
	if len(a) != 63 || len(b) != 63 || a == b {
		t.Errorf("long names: %q (%d), %q (%d)", a, len(a), b, len(b))
	}
}

func TestDatabaseNameProblem(t *testing.T) {
	for name, bad := range map[string]bool{"postgres": true, "template0": true, "template1": true, "pg_x": true,
		"admin": true, "orders": false, "acme_dev_orders": false} {
		if got := DatabaseNameProblem(name) != ""; got != bad {
			t.Errorf("DatabaseNameProblem(%q) bad = %v, want %v", name, got, bad)
		}
	}
}

func TestCacheKeyPrefixProblem(t *testing.T) {
	for prefix, bad := range map[string]bool{"ns.orders:": false, "ns.a:": false, "other.orders:": true, "ns.orders": true,
		"ns.a:b:": true, "ns.:": true, "ns.a*:": true, "nsx.a:": true} {
		if got := CacheKeyPrefixProblem("ns", prefix) != ""; got != bad {
			t.Errorf("CacheKeyPrefixProblem(ns, %q) bad = %v, want %v", prefix, got, bad)
		}
	}
}

func TestDependsOnRefs(t *testing.T) {
	got := DependsOnRefs("app", []v1alpha1.DependencyRef{{Kind: "Database", Name: "db"}, {Kind: "Tenant", Name: "acme", Namespace: "x"},
		{Kind: "Bucket", Name: "b", Namespace: "other"}})
	want := []lifecycle.Ref{{Kind: "Database", Namespace: "app", Name: "db"}, {Kind: "Tenant", Name: "acme"}, {Kind: "Bucket", Namespace: "other", Name: "b"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ref %d = %v, want %v", i, got[i], want[i])
		}
	}
}
