package servers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Registration conventions.
const (
	// Namespace holds the server entries.
	Namespace = "kube-system"
	// SecretType is the type of an entry's Secret.
	SecretType corev1.SecretType = "kubeos.dev/server"
	// LabelKind is the server kind label.
	LabelKind = "kubeos.dev/server-kind"
	// AnnotationTenants limits an entry to a comma-separated list of tenants.
	AnnotationTenants = "kubeos.dev/tenants"
	// AnnotationDefault "true" makes the entry its kind's default.
	AnnotationDefault = "kubeos.dev/default"
)

// Server kinds.
const (
	PostgreSQL   = "postgresql"
	Redis        = "redis"
	NATS         = "nats"
	S3           = "s3"
	Prometheus   = "prometheus"
	Alertmanager = "alertmanager"
)

// Kinds are the server kinds.
var Kinds = []string{PostgreSQL, Redis, NATS, S3, Prometheus, Alertmanager}

// Data keys of an entry's Secret.
const (
	KeyURL             = "url"
	KeyCA              = "ca.crt"
	KeyAccessKeyID     = "accessKeyID"
	KeySecretAccessKey = "secretAccessKey"
	KeyRegion          = "region"
)

// Entry is one registered server. It holds credentials: log Name, never the Entry.
type Entry struct {
	Name string
	Kind string
	// URL is the admin URL (with credentials).
	URL string
	// Data is the Secret's data (url, ca.crt, the s3 keys, anything else).
	Data map[string][]byte
	// Tenants the entry is limited to (nil: every tenant).
	Tenants []string
	Default bool
	// Version is the Secret's resourceVersion: clients built from an entry are rebuilt when
	// it changes.
	Version string
}

// String names the entry without its credentials.
func (e Entry) String() string { return e.Kind + " server " + e.Name }

// AllowedFor reports whether tenant may use the entry.
func (e Entry) AllowedFor(tenant string) bool {
	return e.Tenants == nil || slices.Contains(e.Tenants, tenant)
}

// HostPort is the host and port of the entry's URL (for connection Secrets).
func (e Entry) HostPort() (host, port string, err error) {
	u, err := url.Parse(e.URL)
	if err != nil {
		return "", "", fmt.Errorf("%s: url does not parse", e)
	}
	return u.Hostname(), u.Port(), nil
}

// FromSecret reads an entry; it fails on a Secret that is not a well-formed entry.
func FromSecret(s *corev1.Secret) (Entry, error) {
	if s.Type != SecretType {
		return Entry{}, fmt.Errorf("secret %s/%s is of type %q, not %s", s.Namespace, s.Name, s.Type, SecretType)
	}
	kind := s.Labels[LabelKind]
	if !slices.Contains(Kinds, kind) {
		return Entry{}, fmt.Errorf("server entry %s: label %s is %q, want one of %s", s.Name, LabelKind, kind, strings.Join(Kinds, ", "))
	}
	e := Entry{Name: s.Name, Kind: kind, URL: string(s.Data[KeyURL]), Data: s.Data, Version: s.ResourceVersion,
		Default: s.Annotations[AnnotationDefault] == "true"}
	if e.URL == "" {
		return Entry{}, fmt.Errorf("server entry %s has no %s", s.Name, KeyURL)
	}
	if _, err := url.Parse(e.URL); err != nil {
		return Entry{}, fmt.Errorf("server entry %s: %s does not parse", s.Name, KeyURL) // the URL has credentials: not echoed
	}
	if t, ok := s.Annotations[AnnotationTenants]; ok {
		e.Tenants = []string{}
		for _, n := range strings.Split(t, ",") {
			if n = strings.TrimSpace(n); n != "" {
				e.Tenants = append(e.Tenants, n)
			}
		}
	}
	return e, nil
}

// NotFoundError: no entry of that name and kind, or no default entry of the kind.
type NotFoundError struct{ Kind, Name string }

func (e *NotFoundError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("no default %s server is registered (a Secret of type %s in %s labelled %s=%s and annotated %s=true)",
			e.Kind, SecretType, Namespace, LabelKind, e.Kind, AnnotationDefault)
	}
	return fmt.Sprintf("no %s server entry %q is registered", e.Kind, e.Name)
}

// NotAllowedError: the tenant may not use the entry.
type NotAllowedError struct{ Kind, Name, Tenant string }

func (e *NotAllowedError) Error() string {
	if e.Tenant == "" {
		return fmt.Sprintf("%s server %s is limited to some tenants and this namespace belongs to none", e.Kind, e.Name)
	}
	return fmt.Sprintf("tenant %s may not use %s server %s", e.Tenant, e.Kind, e.Name)
}

// IsNotFound and IsNotAllowed classify Resolve's errors.
func IsNotFound(err error) bool   { var e *NotFoundError; return errors.As(err, &e) }
func IsNotAllowed(err error) bool { var e *NotAllowedError; return errors.As(err, &e) }

// List returns the well-formed entries of kind (all kinds when empty), sorted by name.
func List(ctx context.Context, r client.Reader, kind string) ([]Entry, error) {
	var list corev1.SecretList
	opts := []client.ListOption{client.InNamespace(Namespace)}
	if kind != "" {
		opts = append(opts, client.MatchingLabels{LabelKind: kind})
	} else {
		opts = append(opts, client.HasLabels{LabelKind})
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("list server entries: %w", err)
	}
	var out []Entry
	for i := range list.Items {
		if e, err := FromSecret(&list.Items[i]); err == nil && list.Items[i].DeletionTimestamp == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Resolve finds the entry of kind named name (the default one when name is empty) that
// tenant may use. With several defaults the first by name wins.
func Resolve(ctx context.Context, r client.Reader, kind, name, tenant string) (Entry, error) {
	entries, err := List(ctx, r, kind)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range entries {
		if (name == "" && e.Default) || (name != "" && e.Name == name) {
			if !e.AllowedFor(tenant) {
				if name == "" {
					continue // another default may be open to the tenant
				}
				return Entry{}, &NotAllowedError{Kind: kind, Name: e.Name, Tenant: tenant}
			}
			return e, nil
		}
	}
	return Entry{}, &NotFoundError{Kind: kind, Name: name}
}

// Registry resolves entries through a reader that can be swapped for an informer cache
// once it has synced.
type Registry struct {
	reader atomic.Pointer[client.Reader]
}

// NewRegistry reads through r until SetReader.
func NewRegistry(r client.Reader) *Registry {
	g := &Registry{}
	g.SetReader(r)
	return g
}

// SetReader replaces the reader.
func (g *Registry) SetReader(r client.Reader) { g.reader.Store(&r) }

// Reader is the current reader.
func (g *Registry) Reader() client.Reader { return *g.reader.Load() }

// Resolve is Resolve through the registry's reader.
func (g *Registry) Resolve(ctx context.Context, kind, name, tenant string) (Entry, error) {
	return Resolve(ctx, g.Reader(), kind, name, tenant)
}

// List is List through the registry's reader.
func (g *Registry) List(ctx context.Context, kind string) ([]Entry, error) {
	return List(ctx, g.Reader(), kind)
}
