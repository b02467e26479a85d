package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/backup"
	"kubeos.dev/kube/internal/dataservices/postgres"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerDatabase registers the Database kind (PostgreSQL databases and roles).
func registerDatabase(e *lifecycle.Engine, o Options) error {
	d := &databaseDriver{o: o, pools: &postgres.Pools{}}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Database]{Kind: "Database",
		New: func() *v1alpha1.Database { return &v1alpha1.Database{} }, Driver: d,
		MaxConcurrentReconciles: 8, PeriodicRequeue: DataPeriod,
		Dependencies: databaseDependencies})
}

// databaseDependencies: the Credential of passwordFrom, the Databases granted to, the Backup
// restored from.
func databaseDependencies(db *v1alpha1.Database) []lifecycle.Ref {
	var out []lifecycle.Ref
	if p := db.Spec.PasswordFrom; p != nil && p.Credential != "" {
		out = append(out, lifecycle.Ref{Kind: "Credential", Namespace: db.Namespace, Name: p.Credential})
	}
	for _, g := range db.Spec.Grants {
		ns := g.Namespace
		if ns == "" {
			ns = db.Namespace
		}
		out = append(out, lifecycle.Ref{Kind: "Database", Namespace: ns, Name: g.Database})
	}
	return out
}

// DatabaseName is the name of db's database on the server: spec.databaseName, else
// <namespace>_<name> with every character outside [a-z0-9_] as "_", at most 63 bytes.
func DatabaseName(db *v1alpha1.Database) string {
	if db.Spec.DatabaseName != "" {
		return db.Spec.DatabaseName
	}
	var b strings.Builder
	for _, c := range db.Namespace + "_" + db.Name {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return shortName(b.String(), 63)
}

type databaseDriver struct {
	o     Options
	pools *postgres.Pools
}

// target is what one reconcile works with.
type dbTarget struct {
	entry  servers.Entry
	server *postgres.Server
	spec   postgres.Spec
	secret string
	next   time.Duration // the Credential's next rotation
}

func (d *databaseDriver) target(ctx context.Context, db *v1alpha1.Database, withPassword bool) (*dbTarget, *lifecycle.Outcome, error) {
	if db.Spec.Mode == v1alpha1.DatabaseDedicated {
		return nil, &lifecycle.Outcome{Terminal: errors.New("mode Dedicated is not offered yet: use Shared"), Reason: "ModeNotOffered"}, nil
	}
	entry, out, err := resolveServer(ctx, d.o, servers.PostgreSQL, db.Namespace, db.Spec.Server, db.Status.Server)
	if out != nil || err != nil {
		return nil, out, err
	}
	srv, err := d.pools.Get(ctx, entry.Name, entry.Version, entry.URL)
	if err != nil {
		return nil, nil, err
	}
	name := DatabaseName(db)
	t := &dbTarget{entry: entry, server: srv, secret: v1alpha1.ConnectionSecretName(db.Name, "Database"),
		spec: postgres.Spec{Database: name, Role: name, Owner: db.Namespace + "/" + db.Name, ConnectionLimit: -1,
			Extensions: db.Spec.Extensions, Schemas: db.Spec.Schemas}}
	if db.Spec.ConnectionLimit != nil {
		t.spec.ConnectionLimit = *db.Spec.ConnectionLimit
	}
	for _, g := range db.Spec.Grants {
		ns := g.Namespace
		if ns == "" {
			ns = db.Namespace
		}
		var other v1alpha1.Database
		if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: g.Database}, &other); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "GranteeNotFound",
					Message: "waiting for Database " + ns + "/" + g.Database, RequeueAfter: 10 * time.Second}, nil
			}
			return nil, nil, err
		}
		if other.Status.Server != "" && other.Status.Server != entry.Name {
			return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("grant to Database %s/%s: it is on server %s, this one on %s", ns, g.Database, other.Status.Server, entry.Name),
				Reason: "GranteeOnAnotherServer"}, nil
		}
		t.spec.Grants = append(t.spec.Grants, postgres.Grant{Role: DatabaseName(&other), Privileges: g.Privileges})
	}
	db.Status.Server, db.Status.DatabaseName, db.Status.Role = entry.Name, name, name
	db.Status.ConnectionSecret = t.secret
	if withPassword {
		cur, out, err := connectionSecret(ctx, d.o.Client, db, t.secret)
		if out != nil || err != nil {
			return nil, out, err
		}
		pw, next, out, err := desiredPassword(ctx, d.o, db, db.Spec.PasswordFrom, cur)
		if out != nil || err != nil {
			return nil, out, err
		}
		t.spec.Password, t.next = pw, next
	}
	return t, nil, nil
}

// connection is the connection Secret's data.
func (t *dbTarget) connection() (map[string][]byte, error) {
	host, port, err := t.entry.HostPort()
	if err != nil {
		return nil, err
	}
	if port == "" {
		port = "5432"
	}
	u := url.URL{Scheme: "postgresql", User: url.UserPassword(t.spec.Role, t.spec.Password), Host: host + ":" + port, Path: "/" + t.spec.Database}
	if q, err := url.Parse(t.entry.URL); err == nil && q.Query().Get("sslmode") != "" {
		u.RawQuery = "sslmode=" + q.Query().Get("sslmode")
	}
	pgpass := func(s string) string { return strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(s) }
	return map[string][]byte{
		"host": []byte(host), "port": []byte(port), "username": []byte(t.spec.Role), "password": []byte(t.spec.Password),
		"dbname": []byte(t.spec.Database), "uri": []byte(u.String()),
		"jdbc-uri": []byte(fmt.Sprintf("jdbc:postgresql://%s:%s/%s?user=%s&password=%s", host, port, t.spec.Database,
			url.QueryEscape(t.spec.Role), url.QueryEscape(t.spec.Password))),
		".pgpass": []byte(fmt.Sprintf("%s:%s:%s:%s:%s\n", host, port, pgpass(t.spec.Database), pgpass(t.spec.Role), pgpass(t.spec.Password))),
	}, nil
}

func conflictOutcome(err error) *lifecycle.Outcome {
	if errors.Is(err, postgres.ErrConflict) || errors.Is(err, postgres.ErrUnsafeRole) {
		return &lifecycle.Outcome{Terminal: err, Reason: "NameConflict"}
	}
	return nil
}

func (d *databaseDriver) Observe(ctx context.Context, db *v1alpha1.Database) (lifecycle.Outcome, error) {
	t, out, err := d.target(ctx, db, true)
	if out != nil || err != nil {
		return deref(out), err
	}
	st, err := t.server.Observe(ctx, t.spec)
	if o := conflictOutcome(err); o != nil {
		return *o, nil
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	db.Status.ObservedSizeBytes = st.SizeBytes
	if !st.RoleExists || !st.DatabaseExists {
		return lifecycle.Outcome{RequeueAfter: t.next}, nil
	}
	want, err := t.connection()
	if err != nil {
		return lifecycle.Outcome{Terminal: err}, nil
	}
	cur, _, err := connectionSecret(ctx, d.o.Client, db, t.secret)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Exists: true, UpToDate: st.UpToDate(t.spec) && secretUpToDate(cur, want), RequeueAfter: t.next}, nil
}

func (d *databaseDriver) Provision(ctx context.Context, db *v1alpha1.Database) (lifecycle.Outcome, error) {
	return d.ensure(ctx, db, "Provisioned")
}

func (d *databaseDriver) Update(ctx context.Context, db *v1alpha1.Database) (lifecycle.Outcome, error) {
	return d.ensure(ctx, db, "Updated")
}

func (d *databaseDriver) ensure(ctx context.Context, db *v1alpha1.Database, reason string) (lifecycle.Outcome, error) {
	provisionedBefore := meta.IsStatusConditionTrue(db.Status.Conditions, lifecycle.ConditionReady)
	t, out, err := d.target(ctx, db, true)
	if out != nil || err != nil {
		return deref(out), err
	}
	created, err := t.server.Ensure(ctx, t.spec)
	if o := conflictOutcome(err); o != nil {
		return *o, nil
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	msg := fmt.Sprintf("database %s on server %s", t.spec.Database, t.entry.Name)
	if slices.Contains(created, "database "+t.spec.Database) && db.Spec.RestoreFrom != nil {
		if err := d.restore(ctx, db, t); err != nil {
			return lifecycle.Outcome{}, err
		}
		msg += ", restored from Backup " + db.Spec.RestoreFrom.Backup
	}
	data, err := t.connection()
	if err != nil {
		return lifecycle.Outcome{Terminal: err}, nil
	}
	if err := writeConnectionSecret(ctx, d.o.Client, db, "Database", t.secret, data); err != nil {
		return lifecycle.Outcome{}, err
	}
	if reset := postgres.PasswordOf(t.spec.Role); slices.Contains(created, reset) {
		created = slices.DeleteFunc(created, func(s string) bool { return s == reset })
		if provisionedBefore && len(created) == 0 {
			reason = "PasswordReset"
			msg = fmt.Sprintf("the password of role %s was changed on server %s outside Kube; reset to the connection Secret's", t.spec.Role, t.entry.Name)
			d.o.Events.Warning(db, reason, "Observe", msg)
			d.o.Log.Info("drift repaired", "kind", "Database", "namespace", db.Namespace, "name", db.Name, "reset", reset)
		}
	}
	if len(created) > 0 && provisionedBefore {
		reason = "Recreated"
		msg = fmt.Sprintf("%s was missing on server %s (removed outside Kube); re-created", strings.Join(created, " and "), t.entry.Name)
		d.o.Events.Warning(db, "Recreated", "Observe", msg)
		d.o.Log.Info("drift repaired", "kind", "Database", "namespace", db.Namespace, "name", db.Name, "recreated", created)
	}
	return lifecycle.Outcome{Reason: reason, Message: msg, RequeueAfter: t.next}, nil
}

func (d *databaseDriver) restore(ctx context.Context, db *v1alpha1.Database, t *dbTarget) error {
	kind, rc, err := openBackupArchive(ctx, d.o, db.Namespace, db.Spec.RestoreFrom.Backup, db.Spec.RestoreFrom.Archive)
	if err != nil {
		return fmt.Errorf("restore from Backup %s: %w", db.Spec.RestoreFrom.Backup, err)
	}
	defer rc.Close()
	if kind != "Database" {
		return fmt.Errorf("restore from Backup %s: it backs up a %s, not a Database", db.Spec.RestoreFrom.Backup, kind)
	}
	if err := backup.RestorePostgres(ctx, t.entry.URL, t.spec.Database, t.spec.Role, rc); err != nil {
		// Next attempt starts from an empty database again.
		if derr := t.server.DropDatabase(ctx, t.spec); derr != nil {
			return fmt.Errorf("restore from Backup %s: %w (and dropping the partial database: %v)", db.Spec.RestoreFrom.Backup, err, derr)
		}
		return fmt.Errorf("restore from Backup %s: %w", db.Spec.RestoreFrom.Backup, err)
	}
	return nil
}

func (d *databaseDriver) Deprovision(ctx context.Context, db *v1alpha1.Database) (lifecycle.Outcome, error) {
	if db.Status.Server == "" {
		return lifecycle.Outcome{Reason: "NothingProvisioned"}, nil
	}
	entry, err := d.o.Servers.Resolve(ctx, servers.PostgreSQL, db.Status.Server, "")
	if servers.IsNotFound(err) {
		return lifecycle.Outcome{Reason: "ServerGone", Message: "server " + db.Status.Server + " is no longer registered"}, nil
	}
	if err != nil && !servers.IsNotAllowed(err) {
		return lifecycle.Outcome{}, err
	}
	if err != nil { // a tenant-limited entry: resolve without the tenant check
		if entry, err = findEntry(ctx, d.o, servers.PostgreSQL, db.Status.Server); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	srv, err := d.pools.Get(ctx, entry.Name, entry.Version, entry.URL)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	name := db.Status.DatabaseName
	if name == "" {
		name = DatabaseName(db)
	}
	sp := postgres.Spec{Database: name, Role: name, Owner: db.Namespace + "/" + db.Name}
	switch deletionPolicy(db.Spec.DeletionPolicy) {
	case v1alpha1.DeletionDelete:
		err = srv.Drop(ctx, sp)
	default:
		err = srv.RevokeLogin(ctx, sp)
	}
	if errors.Is(err, postgres.ErrConflict) || errors.Is(err, postgres.ErrUnsafeRole) {
		return lifecycle.Outcome{Reason: "NotOurs", Message: err.Error()}, nil // never touch what is not ours
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Reason: deletionPolicy(db.Spec.DeletionPolicy), Message: "database " + name + " on server " + entry.Name}, nil
}

// findEntry reads an entry by name whatever its tenants (teardown of what was provisioned).
func findEntry(ctx context.Context, o Options, kind, name string) (servers.Entry, error) {
	entries, err := o.Servers.List(ctx, kind)
	if err != nil {
		return servers.Entry{}, err
	}
	for _, e := range entries {
		if e.Name == name {
			return e, nil
		}
	}
	return servers.Entry{}, &servers.NotFoundError{Kind: kind, Name: name}
}

func deref(o *lifecycle.Outcome) lifecycle.Outcome {
	if o == nil {
		return lifecycle.Outcome{}
	}
	return *o
}

// NewDatabaseDriver is the Database driver alone (benchmarks that run it under their own
// controller); o.Client and o.Servers are required.
func NewDatabaseDriver(o Options) lifecycle.Driver[*v1alpha1.Database] {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &databaseDriver{o: o, pools: &postgres.Pools{}}
}
