package servers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func entry(name, kind, tenants string, def bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: map[string]string{LabelKind: kind},
		Annotations: map[string]string{}}, Type: SecretType, Data: map[string][]byte{KeyURL: []byte("postgres://admin:SECRETPW@127.0.0.1:5432/postgres")}}
	if tenants != "-" {
		s.Annotations[AnnotationTenants] = tenants
	}
	if def {
		s.Annotations[AnnotationDefault] = "true"
	}
	return s
}

func TestResolve(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	bad := entry("broken", PostgreSQL, "-", true)
	delete(bad.Data, KeyURL)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		entry("shared", PostgreSQL, "-", false),
		entry("acme-only", PostgreSQL, "acme", true),
		entry("default-all", PostgreSQL, "-", true),
		entry("cache", Redis, "-", false),
		bad,
	).Build()
	ctx := context.Background()
	for _, tc := range []struct {
		kind, name, tenant, want string
		notFound, notAllowed     bool
	}{
		{kind: PostgreSQL, name: "shared", tenant: "acme", want: "shared"},
		{kind: PostgreSQL, name: "acme-only", tenant: "acme", want: "acme-only"},
		{kind: PostgreSQL, name: "acme-only", tenant: "globex", notAllowed: true},
		{kind: PostgreSQL, name: "acme-only", tenant: "", notAllowed: true},
		{kind: PostgreSQL, name: "", tenant: "acme", want: "acme-only"},     // first default by name open to the tenant
		{kind: PostgreSQL, name: "", tenant: "globex", want: "default-all"}, // acme-only is skipped
		{kind: PostgreSQL, name: "cache", tenant: "acme", notFound: true},   // wrong kind
		{kind: PostgreSQL, name: "broken", tenant: "acme", notFound: true},  // malformed entries are ignored
		{kind: Redis, name: "", tenant: "acme", notFound: true},             // no default
	} {
		e, err := Resolve(ctx, c, tc.kind, tc.name, tc.tenant)
		switch {
		case tc.notFound && !IsNotFound(err), tc.notAllowed && !IsNotAllowed(err):
			t.Errorf("Resolve(%s, %q, %q): %v", tc.kind, tc.name, tc.tenant, err)
		case tc.want != "" && (err != nil || e.Name != tc.want):
			t.Errorf("Resolve(%s, %q, %q) = %s, %v; want %s", tc.kind, tc.name, tc.tenant, e.Name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRETPW") {
			t.Errorf("an error names the password: %v", err)
		}
	}
	if s := (Entry{Name: "x", Kind: PostgreSQL, URL: "postgres://a:SECRETPW@h"}).String(); strings.Contains(s, "SECRETPW") {
		t.Errorf("Entry.String shows the password: %s", s)
	}
}

func TestEnsure(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(entry("ext", PostgreSQL, "-", true)).Build()
	ctx := context.Background()
	data := map[string][]byte{KeyURL: []byte("nats://u:p@127.0.0.1:4222")}
	if err := Ensure(ctx, c, "nats-embedded", NATS, data, true); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, c, "pg-embedded", PostgreSQL, data, true); err != nil {
		t.Fatal(err)
	}
	if e, err := Resolve(ctx, c, NATS, "", "any"); err != nil || e.Name != "nats-embedded" {
		t.Fatalf("embedded NATS is not the default: %v %v", e.Name, err)
	}
	if e, err := Resolve(ctx, c, PostgreSQL, "", "any"); err != nil || e.Name != "ext" {
		t.Fatalf("an existing default lost to the embedded one: %v %v", e.Name, err)
	}
	if err := Ensure(ctx, c, "nats-embedded", NATS, data, true); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
}
