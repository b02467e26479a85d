package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"kubeos.dev/kube/internal/dataservices/servers/testservers"
)

func TestScramVerifierKnownAnswer(t *testing.T) {
	// RFC 7677's example: password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations.
	salt := []byte{0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e, 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81}
	got, err := scramVerifier("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
	if got != want {
		t.Fatalf("verifier\n got %s\nwant %s", got, want)
	}
}

func TestVerifierMatches(t *testing.T) {
	rfc := "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
	fresh, err := ScramVerifier("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, verifier, password string
		want                     bool
	}{
		{"RFC 7677's example", rfc, "pencil", true},
		{"another password", rfc, "pencil2", false},
		{"a fresh verifier", fresh, "s3cret", true},
		{"a fresh verifier, wrong password", fresh, "secret", false},
		{"md5", "md5" + strings.Repeat("0", 32), "pencil", false},
		{"empty", "", "pencil", false},
		{"no keys", "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==", "pencil", false},
		{"bad iterations", "SCRAM-SHA-256$x:W22ZaJ0SNY7soEsUEjb6gQ==$a:b", "pencil", false},
		{"huge iterations", "SCRAM-SHA-256$999999999:W22ZaJ0SNY7soEsUEjb6gQ==$a:b", "pencil", false},
		{"bad salt", "SCRAM-SHA-256$4096:!!$a:b", "pencil", false},
		{"other keys", strings.Replace(rfc, "wfPL", "xfPL", 1), "pencil", false},
	} {
		if got := VerifierMatches(c.verifier, c.password); got != c.want {
			t.Errorf("%s: VerifierMatches = %v, want %v", c.name, got, c.want)
		}
	}
}

func connect(t *testing.T, url string) error {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(context.Background(), "SELECT 1")
	return err
}

func TestProvisionLifecycle(t *testing.T) {
	ctx := context.Background()
	pg := testservers.StartPostgres(t)
	s, err := Open(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := Spec{Database: "team_a", Role: "team_a", Owner: "a/db", Password: "pw-a'quote", ConnectionLimit: -1,
		Extensions: []string{"pg_trgm"}, Schemas: []string{"app"}}
	b := Spec{Database: "team_b", Role: "team_b", Owner: "b/db", Password: "pw-b", ConnectionLimit: 5,
		Grants: []Grant{{Role: "team_a", Privileges: []string{"SELECT"}}}}
	for range 2 { // idempotent
		if _, err := s.Ensure(ctx, a); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ensure(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range []Spec{a, b} {
		st, err := s.Observe(ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		if !st.UpToDate(sp) {
			t.Fatalf("%s not up to date after Ensure: %+v", sp.Database, st)
		}
	}
	if err := connect(t, pg.URLFor("team_a", a.Password, "team_a")); err != nil {
		t.Fatalf("team_a cannot log in to its database: %v", err)
	}
	// Role c (no grant) cannot connect to team_b's database; team_a (granted) can.
	c := Spec{Database: "team_c", Role: "team_c", Owner: "c/db", Password: "pw-c", ConnectionLimit: -1}
	if _, err := s.Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, pg.URLFor("team_c", "pw-c", "team_b")); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("team_c connected to team_b's database: %v", err)
	}
	if err := connect(t, pg.URLFor("team_a", a.Password, "team_b")); err != nil {
		t.Fatalf("granted team_a cannot connect to team_b: %v", err)
	}
	// A conflicting claim is refused and changes nothing.
	if _, err := s.Ensure(ctx, Spec{Database: "team_a", Role: "team_a", Owner: "evil/db", Password: "x"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting claim: %v, want ErrConflict", err)
	}
	if _, err := s.Ensure(ctx, Spec{Database: "x", Role: "admin", Owner: "evil/db", Password: "x"}); !errors.Is(err, ErrUnsafeRole) {
		t.Fatalf("claim of the superuser: %v, want ErrUnsafeRole", err)
	}
	if err := connect(t, pg.URLFor("team_a", a.Password, "team_a")); err != nil {
		t.Fatalf("team_a lost its login to a refused claim: %v", err)
	}
	// Password change.
	a.Password = "new-pw"
	if _, err := s.Ensure(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, pg.URLFor("team_a", "new-pw", "team_a")); err != nil {
		t.Fatalf("new password refused: %v", err)
	}
	if err := connect(t, pg.URLFor("team_a", "pw-a'quote", "team_a")); err == nil {
		t.Fatal("old password still accepted")
	}
	// Drift: a dropped database is re-created.
	if _, err := s.pool.Exec(ctx, "DROP DATABASE team_c"); err != nil {
		t.Fatal(err)
	}
	created, err := s.Ensure(ctx, c)
	if err != nil || len(created) != 1 || created[0] != "database team_c" {
		t.Fatalf("re-create: %v %v", created, err)
	}
	// Retain: login revoked, database kept.
	if err := s.RevokeLogin(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, pg.URLFor("team_c", "pw-c", "team_c")); err == nil {
		t.Fatal("retained role still logs in")
	}
	if ok, _, _ := s.databaseOwner(ctx, "team_c"); !ok {
		t.Fatal("retained database is gone")
	}
	// Delete: team_a (granted on team_b) is dropped with its database.
	if err := s.Drop(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx, a); err != nil {
		t.Fatalf("second drop: %v", err)
	}
	if ok, _ := s.RoleExists(ctx, "team_a"); ok {
		t.Fatal("role team_a still exists")
	}
	if ok, _, _ := s.databaseOwner(ctx, "team_a"); ok {
		t.Fatal("database team_a still exists")
	}
	b.Grants = nil
	if _, err := s.Ensure(ctx, b); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Observe(ctx, b); !st.UpToDate(b) {
		t.Fatalf("team_b after its grantee went: %+v", st)
	}
}
