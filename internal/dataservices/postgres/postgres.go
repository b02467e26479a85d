package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrConflict wraps the error of a role or database that exists and is not the caller's.
var ErrConflict = errors.New("owned by someone else")

// ErrUnsafeRole: the role exists with superuser or other admin rights; it is never touched.
var ErrUnsafeRole = errors.New("role has administrative rights")

// Spec is one database with its owner role.
type Spec struct {
	// Database and Role names on the server.
	Database, Role string
	// Owner is the key of the object that owns them ("namespace/name"), kept in the role's
	// comment.
	Owner string
	// Password of the role (plain; sent hashed).
	Password string
	// ConnectionLimit of the role (-1: unlimited).
	ConnectionLimit int32
	Extensions      []string
	Schemas         []string
	// Grants give other roles (of the same tenant) privileges on this database.
	Grants []Grant
}

// Grant gives Role privileges: database privileges (CONNECT, TEMPORARY, CREATE) on the
// database, table privileges (SELECT, INSERT, …) on every table of the public schema and the
// spec's schemas, current and future. CONNECT is always granted with any other privilege.
type Grant struct {
	Role       string
	Privileges []string
}

var databasePrivileges = []string{"CONNECT", "TEMPORARY", "CREATE"}

// TablePrivileges are the privileges a Grant may give on tables.
var TablePrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"}

// State is what Observe finds.
type State struct {
	RoleExists, DatabaseExists bool
	// CanLogin, ConnectionLimit: the role's.
	CanLogin        bool
	ConnectionLimit int32
	// PublicConnect: PUBLIC may connect (REVOKE not done).
	PublicConnect bool
	// Grantees with privileges on the database (other than the owner), and theirs.
	Grantees map[string][]string
	// SizeBytes of the database.
	SizeBytes int64
	// Extensions and Schemas present in the database (of those asked for).
	Extensions, Schemas []string
	// PasswordChanged: the role's stored verifier was not made from the spec's password (a
	// password changed outside Kube). Only known when the admin may read pg_authid (a
	// superuser); false otherwise.
	PasswordChanged bool
}

// Server is an admin connection pool to one PostgreSQL server, plus pools to its databases
// opened on demand (extensions, schemas, grants are per database).
type Server struct {
	url  string
	pool *pgxpool.Pool
}

// Open connects to the server's admin URL (postgres://admin:pw@host:port/postgres).
func Open(ctx context.Context, adminURL string) (*Server, error) {
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, errors.New("postgres: the server's admin url does not parse") // it has the password
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Server{url: adminURL, pool: pool}, nil
}

// Close closes the pool.
func (s *Server) Close() { s.pool.Close() }

// Ping checks the server answers.
func (s *Server) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// withDB runs f on a connection to database name as the admin, closed afterwards (a
// server with thousands of databases must not keep a pool per database).
func (s *Server) withDB(ctx context.Context, name string, f func(c *pgx.Conn) error) error {
	cfg, err := pgx.ParseConfig(s.url)
	if err != nil {
		return errors.New("postgres: the server's admin url does not parse")
	}
	cfg.Database = name
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres: database %s: %w", name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	return f(c)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string constant (standard_conforming_strings is on since PostgreSQL 9.1).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// PasswordOf names, in Ensure's report, a role password that was reset.
func PasswordOf(role string) string { return "password of role " + role }

// marker is the role comment that records its owner.
func marker(owner string) string { return "kubeos.dev/owner=" + owner }

// roleOwner checks role: absent, ours (owner matches), or someone else's (ErrConflict /
// ErrUnsafeRole).
func (s *Server) roleOwner(ctx context.Context, q querier, role, owner string) (exists bool, canLogin bool, limit int32, err error) {
	var comment *string
	var super, createRole, createDB, repl, bypass bool
	err = q.QueryRow(ctx, `SELECT r.rolcanlogin, r.rolconnlimit, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication, r.rolbypassrls,
		shobj_description(r.oid, 'pg_authid') FROM pg_roles r WHERE r.rolname = $1`, role).
		Scan(&canLogin, &limit, &super, &createRole, &createDB, &repl, &bypass, &comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, 0, nil
	}
	if err != nil {
		return false, false, 0, fmt.Errorf("postgres: look up role %s: %w", role, err)
	}
	if super || createRole || createDB || repl || bypass {
		return true, canLogin, limit, fmt.Errorf("postgres: role %s: %w", role, ErrUnsafeRole)
	}
	if comment == nil || *comment != marker(owner) {
		return true, canLogin, limit, fmt.Errorf("postgres: role %s exists and is not managed for %s: %w", role, owner, ErrConflict)
	}
	return true, canLogin, limit, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// databaseOwner returns whether db exists and its owner's name.
func (s *Server) databaseOwner(ctx context.Context, db string) (exists bool, owner string, err error) {
	err = s.pool.QueryRow(ctx, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, db).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("postgres: look up database %s: %w", db, err)
	}
	return true, owner, nil
}

// Observe reports the state of sp on the server (the password is checked when sp.Password
// is set).
func (s *Server) Observe(ctx context.Context, sp Spec) (State, error) {
	var st State
	var err error
	st.RoleExists, st.CanLogin, st.ConnectionLimit, err = s.roleOwner(ctx, s.pool, sp.Role, sp.Owner)
	if err != nil {
		return st, err
	}
	if st.RoleExists && sp.Password != "" {
		if st.PasswordChanged, err = s.passwordChanged(ctx, sp.Role, sp.Password); err != nil {
			return st, err
		}
	}
	exists, owner, err := s.databaseOwner(ctx, sp.Database)
	if err != nil {
		return st, err
	}
	if exists && owner != sp.Role {
		return st, fmt.Errorf("postgres: database %s exists with owner %s: %w", sp.Database, owner, ErrConflict)
	}
	st.DatabaseExists = exists
	if !exists {
		return st, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type
		FROM pg_database d, aclexplode(COALESCE(d.datacl, acldefault('d', d.datdba))) a WHERE d.datname = $1`, sp.Database)
	if err != nil {
		return st, fmt.Errorf("postgres: privileges of database %s: %w", sp.Database, err)
	}
	st.Grantees = map[string][]string{}
	for rows.Next() {
		var who, priv string
		if err := rows.Scan(&who, &priv); err != nil {
			rows.Close()
			return st, err
		}
		switch who {
		case "PUBLIC":
			if priv == "CONNECT" {
				st.PublicConnect = true
			}
		case sp.Role:
		default:
			st.Grantees[who] = append(st.Grantees[who], priv)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("postgres: privileges of database %s: %w", sp.Database, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT pg_database_size($1)`, sp.Database).Scan(&st.SizeBytes); err != nil {
		return st, fmt.Errorf("postgres: size of database %s: %w", sp.Database, err)
	}
	if len(sp.Extensions) > 0 || len(sp.Schemas) > 0 {
		err := s.withDB(ctx, sp.Database, func(db *pgx.Conn) error {
			if err := db.QueryRow(ctx, `SELECT COALESCE(array_agg(extname::text), '{}') FROM pg_extension WHERE extname = ANY($1)`, sp.Extensions).Scan(&st.Extensions); err != nil {
				return fmt.Errorf("postgres: extensions of database %s: %w", sp.Database, err)
			}
			if err := db.QueryRow(ctx, `SELECT COALESCE(array_agg(nspname::text), '{}') FROM pg_namespace WHERE nspname = ANY($1)`, sp.Schemas).Scan(&st.Schemas); err != nil {
				return fmt.Errorf("postgres: schemas of database %s: %w", sp.Database, err)
			}
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// passwordChanged reads the role's SCRAM verifier from pg_authid (superusers only: for
// another admin the password is not observable and this reports false) and checks it
// against password.
func (s *Server) passwordChanged(ctx context.Context, role, password string) (bool, error) {
	var verifier *string
	err := s.pool.QueryRow(ctx, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, role).Scan(&verifier)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
		return false, nil
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("postgres: password of role %s: %w", role, err)
	}
	return verifier == nil || !VerifierMatches(*verifier, password), nil
}

// UpToDate reports whether st matches sp.
func (st State) UpToDate(sp Spec) bool {
	if !st.RoleExists || !st.DatabaseExists || !st.CanLogin || st.PublicConnect || st.ConnectionLimit != sp.ConnectionLimit || st.PasswordChanged {
		return false
	}
	if !sameSet(st.Extensions, sp.Extensions) || !sameSet(st.Schemas, sp.Schemas) {
		return false
	}
	want := map[string][]string{}
	for _, g := range sp.Grants {
		want[g.Role] = databaseLevel(g.Privileges)
	}
	if len(want) != len(st.Grantees) {
		return false
	}
	for role, privs := range want {
		if !sameSet(privs, st.Grantees[role]) {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// databaseLevel is the database privileges a grant of privs gives (CONNECT always).
func databaseLevel(privs []string) []string {
	out := []string{"CONNECT"}
	for _, p := range privs {
		switch p = strings.ToUpper(p); {
		case p == "ALL":
			return slices.Clone(databasePrivileges)
		case slices.Contains(databasePrivileges, p) && !slices.Contains(out, p):
			out = append(out, p)
		}
	}
	return out
}

func tableLevel(privs []string) []string {
	var out []string
	for _, p := range privs {
		switch p = strings.ToUpper(p); {
		case p == "ALL":
			return slices.Clone(TablePrivileges)
		case slices.Contains(TablePrivileges, p) && !slices.Contains(out, p):
			out = append(out, p)
		}
	}
	return out
}

// Ensure creates or repairs the role and the database of sp and sets the role's password.
// It reports what it had to create or repair (for drift reporting): "role R", "database D",
// and PasswordOf(R) when the role's password had been changed outside Kube.
func (s *Server) Ensure(ctx context.Context, sp Spec) (created []string, err error) {
	verifier, err := ScramVerifier(sp.Password)
	if err != nil {
		return nil, err
	}
	exists, _, _, err := s.roleOwner(ctx, s.pool, sp.Role, sp.Owner)
	if err != nil {
		return nil, err
	}
	if exists {
		changed, err := s.passwordChanged(ctx, sp.Role, sp.Password)
		if err != nil {
			return nil, err
		}
		if changed {
			created = append(created, PasswordOf(sp.Role))
		}
	}
	attrs := fmt.Sprintf("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT %d PASSWORD %s",
		sp.ConnectionLimit, literal(verifier))
	if !exists {
		// Role and its owner comment in one transaction: a crash leaves neither.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(sp.Role)+" "+attrs); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(sp.Role)+" IS "+literal(marker(sp.Owner)))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("postgres: create role %s: %w", sp.Role, err)
		}
		created = append(created, "role "+sp.Role)
	} else if _, err := s.pool.Exec(ctx, "ALTER ROLE "+ident(sp.Role)+" "+attrs); err != nil {
		return nil, fmt.Errorf("postgres: alter role %s: %w", sp.Role, err)
	}
	dbExists, owner, err := s.databaseOwner(ctx, sp.Database)
	if err != nil {
		return created, err
	}
	switch {
	case !dbExists:
		if _, err := s.pool.Exec(ctx, "CREATE DATABASE "+ident(sp.Database)+" OWNER "+ident(sp.Role)); err != nil {
			// A concurrent create of the same database (duplicate_database) is fine if it is ours.
			if ok, o, e2 := s.databaseOwner(ctx, sp.Database); e2 != nil || !ok || o != sp.Role {
				return created, fmt.Errorf("postgres: create database %s: %w", sp.Database, err)
			}
		} else {
			created = append(created, "database "+sp.Database)
		}
	case owner != sp.Role:
		return created, fmt.Errorf("postgres: database %s exists with owner %s: %w", sp.Database, owner, ErrConflict)
	}
	if _, err := s.pool.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+ident(sp.Database)+" FROM PUBLIC"); err != nil {
		return created, fmt.Errorf("postgres: revoke connect on %s: %w", sp.Database, err)
	}
	if err := s.ensureInside(ctx, sp); err != nil {
		return created, err
	}
	return created, nil
}

// ensureInside does what needs a connection to the database itself: extensions, schemas,
// grants (and revokes of grantees no longer listed).
func (s *Server) ensureInside(ctx context.Context, sp Spec) error {
	st, err := s.Observe(ctx, Spec{Database: sp.Database, Role: sp.Role, Owner: sp.Owner})
	if err != nil {
		return err
	}
	if len(sp.Extensions) == 0 && len(sp.Schemas) == 0 && len(sp.Grants) == 0 && len(st.Grantees) == 0 {
		return nil // nothing to do inside: no connection to the database
	}
	return s.withDB(ctx, sp.Database, func(db *pgx.Conn) error { return s.inside(ctx, db, sp, st) })
}

func (s *Server) inside(ctx context.Context, db *pgx.Conn, sp Spec, st State) error {
	for _, e := range sp.Extensions {
		if _, err := db.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ident(e)); err != nil {
			return fmt.Errorf("postgres: extension %s in %s: %w", e, sp.Database, err)
		}
	}
	for _, sc := range sp.Schemas {
		if _, err := db.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident(sc)+" AUTHORIZATION "+ident(sp.Role)); err != nil {
			return fmt.Errorf("postgres: schema %s in %s: %w", sc, sp.Database, err)
		}
	}
	schemas := append([]string{"public"}, sp.Schemas...)
	want := map[string]bool{}
	for _, g := range sp.Grants {
		want[g.Role] = true
		if err := s.grant(ctx, db, sp, schemas, g); err != nil {
			return err
		}
	}
	for who := range st.Grantees {
		if !want[who] {
			if err := s.revokeAll(ctx, db, sp, schemas, who); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) grant(ctx context.Context, db *pgx.Conn, sp Spec, schemas []string, g Grant) error {
	to := ident(g.Role)
	dbPrivs := databaseLevel(g.Privileges)
	stmts := []string{
		"REVOKE ALL ON DATABASE " + ident(sp.Database) + " FROM " + to,
		"GRANT " + strings.Join(dbPrivs, ", ") + " ON DATABASE " + ident(sp.Database) + " TO " + to,
	}
	if _, err := s.pool.Exec(ctx, strings.Join(stmts, "; ")); err != nil {
		return fmt.Errorf("postgres: grant on database %s to %s: %w", sp.Database, g.Role, err)
	}
	tp := tableLevel(g.Privileges)
	var in []string
	for _, sc := range schemas {
		in = append(in,
			"REVOKE ALL ON ALL TABLES IN SCHEMA "+ident(sc)+" FROM "+to,
			"ALTER DEFAULT PRIVILEGES FOR ROLE "+ident(sp.Role)+" IN SCHEMA "+ident(sc)+" REVOKE ALL ON TABLES FROM "+to)
		if len(tp) == 0 {
			in = append(in, "REVOKE USAGE ON SCHEMA "+ident(sc)+" FROM "+to)
			continue
		}
		privs := strings.Join(tp, ", ")
		in = append(in,
			"GRANT USAGE ON SCHEMA "+ident(sc)+" TO "+to,
			"GRANT "+privs+" ON ALL TABLES IN SCHEMA "+ident(sc)+" TO "+to,
			"ALTER DEFAULT PRIVILEGES FOR ROLE "+ident(sp.Role)+" IN SCHEMA "+ident(sc)+" GRANT "+privs+" ON TABLES TO "+to)
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, q := range in {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: grant in database %s to %s: %w", sp.Database, g.Role, err)
	}
	return nil
}

func (s *Server) revokeAll(ctx context.Context, db *pgx.Conn, sp Spec, schemas []string, who string) error {
	if _, err := s.pool.Exec(ctx, "REVOKE ALL ON DATABASE "+ident(sp.Database)+" FROM "+ident(who)); err != nil {
		return fmt.Errorf("postgres: revoke on database %s from %s: %w", sp.Database, who, err)
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, sc := range schemas {
			for _, q := range []string{
				"REVOKE ALL ON ALL TABLES IN SCHEMA " + ident(sc) + " FROM " + ident(who),
				"ALTER DEFAULT PRIVILEGES FOR ROLE " + ident(sp.Role) + " IN SCHEMA " + ident(sc) + " REVOKE ALL ON TABLES FROM " + ident(who),
				"REVOKE ALL ON SCHEMA " + ident(sc) + " FROM " + ident(who),
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: revoke in database %s from %s: %w", sp.Database, who, err)
	}
	return nil
}

// RoleExists reports whether role exists (for grants naming another object's role).
func (s *Server) RoleExists(ctx context.Context, role string) (bool, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, role).Scan(&n); err != nil {
		return false, fmt.Errorf("postgres: look up role %s: %w", role, err)
	}
	return n > 0, nil
}

// RevokeLogin is Retain's teardown: the role keeps its database but can no longer log in,
// and its sessions end.
func (s *Server) RevokeLogin(ctx context.Context, sp Spec) error {
	exists, _, _, err := s.roleOwner(ctx, s.pool, sp.Role, sp.Owner)
	if err != nil || !exists {
		return err
	}
	if _, err := s.pool.Exec(ctx, "ALTER ROLE "+ident(sp.Role)+" NOLOGIN PASSWORD NULL"); err != nil {
		return fmt.Errorf("postgres: revoke login of %s: %w", sp.Role, err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, sp.Role); err != nil {
		return fmt.Errorf("postgres: end sessions of %s: %w", sp.Role, err)
	}
	return nil
}

// Drop is Delete's teardown: the role loses login, the database is dropped (its sessions
// terminated), what the role holds in other databases is revoked, then the role is dropped.
func (s *Server) Drop(ctx context.Context, sp Spec) error {
	exists, _, _, err := s.roleOwner(ctx, s.pool, sp.Role, sp.Owner)
	if err != nil {
		return err
	}
	dbExists, owner, err := s.databaseOwner(ctx, sp.Database)
	if err != nil {
		return err
	}
	if exists {
		if _, err := s.pool.Exec(ctx, "ALTER ROLE "+ident(sp.Role)+" NOLOGIN"); err != nil {
			return fmt.Errorf("postgres: revoke login of %s: %w", sp.Role, err)
		}
	}
	if dbExists && owner == sp.Role {
		if _, err := s.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(sp.Database)+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("postgres: drop database %s: %w", sp.Database, err)
		}
	}
	if !exists {
		return nil
	}
	// Privileges granted to the role in other databases block DROP ROLE: DROP OWNED there.
	rows, err := s.pool.Query(ctx, `SELECT d.datname FROM pg_database d, aclexplode(d.datacl) a
		WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) AND d.datallowconn`, sp.Role)
	if err != nil {
		return fmt.Errorf("postgres: databases granting %s: %w", sp.Role, err)
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: databases granting %s: %w", sp.Role, err)
	}
	slices.Sort(dbs)
	for _, name := range slices.Compact(dbs) {
		err := s.withDB(ctx, name, func(db *pgx.Conn) error {
			if _, err := db.Exec(ctx, "DROP OWNED BY "+ident(sp.Role)); err != nil {
				return fmt.Errorf("postgres: drop what %s holds in %s: %w", sp.Role, name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := s.pool.Exec(ctx, "REVOKE ALL ON DATABASE "+ident(name)+" FROM "+ident(sp.Role)); err != nil {
			return fmt.Errorf("postgres: revoke on %s from %s: %w", name, sp.Role, err)
		}
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, sp.Role); err != nil {
		return fmt.Errorf("postgres: end sessions of %s: %w", sp.Role, err)
	}
	if _, err := s.pool.Exec(ctx, "DROP ROLE IF EXISTS "+ident(sp.Role)); err != nil {
		return fmt.Errorf("postgres: drop role %s: %w", sp.Role, err)
	}
	return nil
}

// Pools keeps one Server per key (a server entry's name and version), reopening it when the
// URL changes.
type Pools struct {
	mu sync.Mutex
	m  map[string]pooled
}

type pooled struct {
	version string
	s       *Server
}

// Get returns the Server for key at version, opening it on first use.
func (p *Pools) Get(ctx context.Context, key, version, adminURL string) (*Server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]pooled{}
	}
	if e, ok := p.m[key]; ok {
		if e.version == version {
			return e.s, nil
		}
		e.s.Close()
		delete(p.m, key)
	}
	s, err := Open(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	p.m[key] = pooled{version: version, s: s}
	return s, nil
}

// DropDatabase drops sp's database (if its owner is sp.Role), keeping the role: a failed
// restore starts again from an empty database.
func (s *Server) DropDatabase(ctx context.Context, sp Spec) error {
	exists, owner, err := s.databaseOwner(ctx, sp.Database)
	if err != nil || !exists || owner != sp.Role {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(sp.Database)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("postgres: drop database %s: %w", sp.Database, err)
	}
	return nil
}
