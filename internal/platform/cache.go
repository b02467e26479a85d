package platform

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"kubeos.dev/kube/internal/dataservices/backup"
	"kubeos.dev/kube/internal/dataservices/redisacl"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerCache registers the Cache kind (Redis ACL users).
func registerCache(e *lifecycle.Engine, o Options) error {
	d := &cacheDriver{o: o, clients: &redisacl.Clients{}}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Cache]{Kind: "Cache",
		New: func() *v1alpha1.Cache { return &v1alpha1.Cache{} }, Driver: d,
		MaxConcurrentReconciles: 8, PeriodicRequeue: DataPeriod,
		Dependencies: func(c *v1alpha1.Cache) []lifecycle.Ref {
			if p := c.Spec.PasswordFrom; p != nil && p.Credential != "" {
				return []lifecycle.Ref{{Kind: "Credential", Namespace: c.Namespace, Name: p.Credential}}
			}
			return nil
		}})
}

// CacheKeyPrefix is c's key and channel prefix: spec.keyPrefix or <namespace>.<name>:.
func CacheKeyPrefix(c *v1alpha1.Cache) string {
	if c.Spec.KeyPrefix != "" {
		return c.Spec.KeyPrefix
	}
	return c.Namespace + "." + c.Name + ":"
}

// CacheUser is c's ACL user: <namespace>.<name> (never "default": it has a dot).
func CacheUser(c *v1alpha1.Cache) string { return c.Namespace + "." + c.Name }

type cacheDriver struct {
	o       Options
	clients *redisacl.Clients
}

type cacheTarget struct {
	entry  servers.Entry
	server *redisacl.Server
	user   redisacl.User
	secret string
	next   time.Duration
}

func (d *cacheDriver) target(ctx context.Context, c *v1alpha1.Cache) (*cacheTarget, *lifecycle.Outcome, error) {
	entry, out, err := resolveServer(ctx, d.o, servers.Redis, c.Namespace, c.Spec.Server, c.Status.Server)
	if out != nil || err != nil {
		return nil, out, err
	}
	srv, err := d.clients.Get(entry.Name, entry.Version, entry.URL)
	if err != nil {
		return nil, nil, err
	}
	t := &cacheTarget{entry: entry, server: srv, secret: v1alpha1.ConnectionSecretName(c.Name, "Cache"),
		user: redisacl.User{Name: CacheUser(c), Prefix: CacheKeyPrefix(c)}}
	c.Status.Server, c.Status.User, c.Status.KeyPrefix, c.Status.ConnectionSecret = entry.Name, t.user.Name, t.user.Prefix, t.secret
	cur, out, err := connectionSecret(ctx, d.o.Client, c, t.secret)
	if out != nil || err != nil {
		return nil, out, err
	}
	pw, next, out, err := desiredPassword(ctx, d.o, c, c.Spec.PasswordFrom, cur)
	if out != nil || err != nil {
		return nil, out, err
	}
	t.user.Password, t.next = pw, next
	return t, nil, nil
}

func (t *cacheTarget) connection() (map[string][]byte, error) {
	host, port, err := t.entry.HostPort()
	if err != nil {
		return nil, err
	}
	if port == "" {
		port = "6379"
	}
	scheme := "redis"
	if u, err := url.Parse(t.entry.URL); err == nil && u.Scheme == "rediss" {
		scheme = "rediss"
	}
	u := url.URL{Scheme: scheme, User: url.UserPassword(t.user.Name, t.user.Password), Host: host + ":" + port}
	return map[string][]byte{"host": []byte(host), "port": []byte(port), "username": []byte(t.user.Name),
		"password": []byte(t.user.Password), "uri": []byte(u.String()), "keyPrefix": []byte(t.user.Prefix)}, nil
}

func (d *cacheDriver) Observe(ctx context.Context, c *v1alpha1.Cache) (lifecycle.Outcome, error) {
	t, out, err := d.target(ctx, c)
	if out != nil || err != nil {
		return deref(out), err
	}
	after := t.next
	st, err := t.server.Observe(ctx, t.user)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if !st.Exists {
		return lifecycle.Outcome{RequeueAfter: after}, nil
	}
	want, err := t.connection()
	if err != nil {
		return lifecycle.Outcome{Terminal: err}, nil
	}
	cur, _, err := connectionSecret(ctx, d.o.Client, c, t.secret)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Exists: true, UpToDate: st.UpToDate && secretUpToDate(cur, want), RequeueAfter: after}, nil
}

func (d *cacheDriver) Provision(ctx context.Context, c *v1alpha1.Cache) (lifecycle.Outcome, error) {
	return d.ensure(ctx, c, "Provisioned")
}

func (d *cacheDriver) Update(ctx context.Context, c *v1alpha1.Cache) (lifecycle.Outcome, error) {
	return d.ensure(ctx, c, "Updated")
}

func (d *cacheDriver) ensure(ctx context.Context, c *v1alpha1.Cache, reason string) (lifecycle.Outcome, error) {
	provisionedBefore := meta.IsStatusConditionTrue(c.Status.Conditions, lifecycle.ConditionReady)
	t, out, err := d.target(ctx, c)
	if out != nil || err != nil {
		return deref(out), err
	}
	created, err := t.server.Ensure(ctx, t.user)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	msg := fmt.Sprintf("user %s on server %s", t.user.Name, t.entry.Name)
	if created && !provisionedBefore && c.Spec.RestoreFrom != nil {
		if err := d.restore(ctx, c, t); err != nil {
			return lifecycle.Outcome{}, err
		}
		msg += ", restored from Backup " + c.Spec.RestoreFrom.Backup
	}
	data, err := t.connection()
	if err != nil {
		return lifecycle.Outcome{Terminal: err}, nil
	}
	if err := writeConnectionSecret(ctx, d.o.Client, c, "Cache", t.secret, data); err != nil {
		return lifecycle.Outcome{}, err
	}
	if created && provisionedBefore {
		reason = "Recreated"
		msg = fmt.Sprintf("ACL user %s was missing on server %s (removed outside Kube); re-created", t.user.Name, t.entry.Name)
		d.o.Events.Warning(c, "Recreated", "Observe", msg)
		d.o.Log.Info("drift repaired", "kind", "Cache", "namespace", c.Namespace, "name", c.Name, "user", t.user.Name)
	}
	return lifecycle.Outcome{Reason: reason, Message: msg, RequeueAfter: t.next}, nil
}

func (d *cacheDriver) restore(ctx context.Context, c *v1alpha1.Cache, t *cacheTarget) error {
	kind, rc, err := openBackupArchive(ctx, d.o, c.Namespace, c.Spec.RestoreFrom.Backup, c.Spec.RestoreFrom.Archive)
	if err != nil {
		return fmt.Errorf("restore from Backup %s: %w", c.Spec.RestoreFrom.Backup, err)
	}
	defer rc.Close()
	if kind != "Cache" {
		return fmt.Errorf("restore from Backup %s: it backs up a %s, not a Cache", c.Spec.RestoreFrom.Backup, kind)
	}
	if _, err := backup.RestoreRedis(ctx, t.entry.URL, t.user.Prefix, rc); err != nil {
		return fmt.Errorf("restore from Backup %s: %w", c.Spec.RestoreFrom.Backup, err)
	}
	return nil
}

func (d *cacheDriver) Deprovision(ctx context.Context, c *v1alpha1.Cache) (lifecycle.Outcome, error) {
	if c.Status.Server == "" {
		return lifecycle.Outcome{Reason: "NothingProvisioned"}, nil
	}
	entry, err := findEntry(ctx, d.o, servers.Redis, c.Status.Server)
	if servers.IsNotFound(err) {
		return lifecycle.Outcome{Reason: "ServerGone", Message: "server " + c.Status.Server + " is no longer registered"}, nil
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	srv, err := d.clients.Get(entry.Name, entry.Version, entry.URL)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	user, prefix := CacheUser(c), CacheKeyPrefix(c)
	if deletionPolicy(c.Spec.DeletionPolicy) == v1alpha1.DeletionDelete {
		err = srv.Delete(ctx, user, prefix)
	} else {
		err = srv.Disable(ctx, user)
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Reason: deletionPolicy(c.Spec.DeletionPolicy), Message: "user " + user + " on server " + entry.Name}, nil
}
