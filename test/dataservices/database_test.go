package dataservices

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func database(ns, name, extra string) string {
	return fmt.Sprintf("apiVersion: kubeos.dev/v1alpha1\nkind: Database\nmetadata: {name: %s, namespace: %s}\nspec: {%s}\n", name, ns, extra)
}

// adminQuery runs sql on the PostgreSQL server as its superuser.
func adminQuery(t *testing.T, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var out string
	if err := c.QueryRow(ctx, sql, args...).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func adminExec(t *testing.T, sql string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestDatabase(t *testing.T) {
	apply(t, aliceKubeconfig, database(acmeNS, "orders", "extensions: [pg_trgm], schemas: [app], connectionLimit: 10"))
	apply(t, bobKubeconfig, database(globexNS, "ledger", ""))
	apply(t, aliceKubeconfig, database(acmeNS, "stock", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "stock", "-n", acmeNS)
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "orders", "-n", acmeNS)
	waitFor(t, bobKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "ledger", "-n", globexNS)
	orders := secretData(t, acmeNS, "orders-database")
	ledger := secretData(t, globexNS, "ledger-database")

	t.Run("the connection Secret logs in with psql", func(t *testing.T) {
		for _, k := range []string{"host", "port", "username", "password", "dbname", "uri", "jdbc-uri", ".pgpass"} {
			if orders[k] == "" {
				t.Errorf("connection secret has no %s", k)
			}
		}
		out, err := psql(orders["uri"], "SELECT current_user || ' ' || current_database()")
		if err != nil {
			t.Fatal(err)
		}
		if want := "acme_dev_orders acme_dev_orders"; out != want {
			t.Fatalf("psql: %q, want %q", out, want)
		}
		if _, err := psql(orders["uri"], "CREATE TABLE app.items (id int); INSERT INTO app.items VALUES (1); SELECT 'x'"); err != nil {
			t.Fatalf("the owner cannot use its schema: %v", err)
		}
		if got := jsonpath(t, aliceKubeconfig, "{.status.server}/{.status.role}/{.status.connectionSecret}", "database", "orders", "-n", acmeNS); got != "pg-main/acme_dev_orders/orders-database" {
			t.Fatalf("status: %s", got)
		}
		if got, err := psql(orders["uri"], "SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'"); err != nil || got != "pg_trgm" {
			t.Fatalf("extension: %q %v", got, err)
		}
	})

	t.Run("a role cannot connect to another tenant's database", func(t *testing.T) {
		other := withDB(t, orders["uri"], "globex_dev_ledger")
		out, err := psql(other, "SELECT 1")
		if err == nil || !strings.Contains(out, "permission denied for database") {
			t.Fatalf("acme's role on globex's database: %q %v", out, err)
		}
		other = withDB(t, ledger["uri"], "acme_dev_orders")
		if out, err := psql(other, "SELECT 1"); err == nil {
			t.Fatalf("globex's role on acme's database: %q", out)
		}
		// Two objects of the same tenant are as separate.
		if out, err := psql(withDB(t, orders["uri"], "acme_dev_stock"), "SELECT 1"); err == nil || !strings.Contains(out, "permission denied for database") {
			t.Fatalf("a role connected to another Database of its tenant without a grant: %q", out)
		}
	})

	t.Run("credentials are not in status, events or the audit log", func(t *testing.T) {
		all, _, _ := kubectl(t, aliceKubeconfig, "", "get", "databases,events", "-n", acmeNS, "-o", "yaml")
		if strings.Contains(all, orders["password"]) {
			t.Fatal("the password is in a Database's status or an event")
		}
		eventually(t, 10*time.Second, func() error {
			b, err := os.ReadFile(auditLog)
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), `"orders-database"`) {
				return fmt.Errorf("no audit event of the connection secret yet")
			}
			for _, s := range []string{orders["password"], ledger["password"], b64(orders["password"]), "admin-pw-for-tests", b64(pg.URL)} {
				if strings.Contains(string(b), s) {
					t.Fatalf("the audit log contains a credential (%d bytes)", len(s))
				}
			}
			return nil
		})
		if strings.Contains(serverLog.String(), orders["password"]) {
			t.Fatal("the server log contains the password")
		}
	})

	t.Run("a dropped database is re-created", func(t *testing.T) {
		adminExec(t, "DROP DATABASE acme_dev_orders WITH (FORCE)")
		eventually(t, 30*time.Second, func() error {
			if _, err := psql(orders["uri"], "SELECT 1"); err != nil {
				return err
			}
			return nil
		})
		eventually(t, 10*time.Second, func() error {
			out, _, _ := kubectl(t, aliceKubeconfig, "", "get", "events", "-n", acmeNS, "--field-selector", "involvedObject.name=orders", "-o", "jsonpath={.items[*].reason}")
			if !strings.Contains(out, "Recreated") {
				return fmt.Errorf("events: %q", out)
			}
			return nil
		})
		if got := jsonpath(t, aliceKubeconfig, `{.status.conditions[?(@.type=="Ready")].reason}`, "database", "orders", "-n", acmeNS); got != "Recreated" {
			t.Fatalf("Ready reason %q, want Recreated", got)
		}
	})

	t.Run("a password changed behind Kube's back is reset", func(t *testing.T) {
		adminExec(t, "ALTER ROLE acme_dev_orders PASSWORD 'changed-outside'")
		if _, err := psql(orders["uri"], "SELECT 1"); err == nil {
			t.Fatal("the old password still logs in after ALTER ROLE")
		}
		eventually(t, 30*time.Second, func() error {
			_, err := psql(orders["uri"], "SELECT 1")
			return err
		})
		eventually(t, 10*time.Second, func() error {
			out, _, _ := kubectl(t, aliceKubeconfig, "", "get", "events", "-n", acmeNS, "--field-selector", "involvedObject.name=orders", "-o", "jsonpath={.items[*].reason}")
			if !strings.Contains(out, "PasswordReset") {
				return fmt.Errorf("events: %q", out)
			}
			return nil
		})
	})

	t.Run("a removed role is re-created", func(t *testing.T) {
		adminExec(t, "DROP DATABASE globex_dev_ledger WITH (FORCE)")
		adminExec(t, "DROP ROLE globex_dev_ledger")
		eventually(t, 30*time.Second, func() error {
			_, err := psql(ledger["uri"], "SELECT 1")
			return err
		})
	})
}

func TestDatabaseCredentialRotation(t *testing.T) {
	apply(t, aliceKubeconfig, `apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: rotating-pw, namespace: acme-dev}
spec: {type: password, rotationPeriod: 10s}
`)
	apply(t, aliceKubeconfig, database(acmeNS, "rotated", "passwordFrom: {credential: rotating-pw}"))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "rotated", "-n", acmeNS)
	first := secretData(t, acmeNS, "rotated-database")
	if cred := secretData(t, acmeNS, "rotating-pw")["password"]; cred != first["password"] {
		// The Credential may have rotated between the two reads: then the next step shows it.
		t.Logf("credential already rotated once")
	}
	if _, err := psql(first["uri"], "SELECT 1"); err != nil {
		t.Fatalf("first password: %v", err)
	}
	var second map[string]string
	eventually(t, 30*time.Second, func() error {
		second = secretData(t, acmeNS, "rotated-database")
		if second["password"] == first["password"] {
			return fmt.Errorf("connection secret not rotated yet")
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		cur := secretData(t, acmeNS, "rotated-database")
		_, err := psql(cur["uri"], "SELECT 1")
		return err
	})
	if _, err := psql(first["uri"], "SELECT 1"); err == nil {
		t.Fatal("the password before the rotation still logs in")
	}
}

func TestDatabaseDeletionPolicy(t *testing.T) {
	apply(t, aliceKubeconfig, database(acmeNS, "kept", ""))
	apply(t, aliceKubeconfig, database(acmeNS, "dropped", "deletionPolicy: Delete"))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "kept", "-n", acmeNS)
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "dropped", "-n", acmeNS)
	kept := secretData(t, acmeNS, "kept-database")
	if _, err := psql(kept["uri"], "CREATE TABLE t (v text); INSERT INTO t VALUES ('still here'); SELECT 1"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kept", "dropped"} {
		if _, errOut, err := kubectl(t, aliceKubeconfig, "", "delete", "database", name, "-n", acmeNS, "--timeout=60s"); err != nil {
			t.Fatalf("delete %s: %v %s", name, err, errOut)
		}
	}
	if got := adminQuery(t, "SELECT count(*)::text FROM pg_database WHERE datname = 'acme_dev_kept'"); got != "1" {
		t.Fatal("Retain: the database is gone")
	}
	if got := adminQuery(t, "SELECT rolcanlogin::text FROM pg_roles WHERE rolname = 'acme_dev_kept'"); got != "false" {
		t.Fatalf("Retain: the role can still log in (%s)", got)
	}
	if _, err := psql(kept["uri"], "SELECT 1"); err == nil {
		t.Fatal("Retain: the retained role still logs in")
	}
	if got := adminQuery(t, "SELECT count(*)::text FROM pg_database WHERE datname = 'acme_dev_dropped'"); got != "0" {
		t.Fatal("Delete: the database is still there")
	}
	if got := adminQuery(t, "SELECT count(*)::text FROM pg_roles WHERE rolname = 'acme_dev_dropped'"); got != "0" {
		t.Fatal("Delete: the role is still there")
	}
	// Re-created with the same name, the retained database is adopted with its data.
	apply(t, aliceKubeconfig, database(acmeNS, "kept", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "kept", "-n", acmeNS)
	again := secretData(t, acmeNS, "kept-database")
	if out, err := psql(again["uri"], "SELECT v FROM t"); err != nil || out != "still here" {
		t.Fatalf("adopted database: %q %v", out, err)
	}
}

func TestDatabaseServerUnreachable(t *testing.T) {
	pg.Stop()
	restarted := false
	defer func() {
		if !restarted {
			_ = pg.Start()
		}
	}()
	apply(t, aliceKubeconfig, database(acmeNS, "late", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Reconciling", "database", "late", "-n", acmeNS)
	eventually(t, 30*time.Second, func() error {
		msg := jsonpath(t, aliceKubeconfig, `{.status.conditions[?(@.type=="Reconciling")].message}`, "database", "late", "-n", acmeNS)
		if !strings.Contains(msg, "connect") {
			return fmt.Errorf("Reconciling message %q does not tell the connection error", msg)
		}
		return nil
	})
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitFor(t, aliceKubeconfig, 90*time.Second, "{.status.phase}", "Active", "database", "late", "-n", acmeNS)
	if _, err := psql(secretData(t, acmeNS, "late-database")["uri"], "SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

func TestDatabaseBadInput(t *testing.T) {
	refused(t, aliceKubeconfig, database(acmeNS, "reserved", "databaseName: postgres"), "spec.databaseName", "is reserved")
	refused(t, aliceKubeconfig, database(acmeNS, "reserved2", "databaseName: template1"), "is reserved")
	refused(t, aliceKubeconfig, database(acmeNS, "badname", "databaseName: Bad-Name"), "spec.databaseName")
	refused(t, aliceKubeconfig, database(acmeNS, "dedicated", "mode: Dedicated"), "spec.mode", "Dedicated is not offered yet")
	refused(t, aliceKubeconfig, database(acmeNS, "noserver", "server: nope"), "spec.server", "nope")
	refused(t, aliceKubeconfig, database(acmeNS, "notmine", "server: pg-globex"), "forbidden", "tenant acme may not use postgresql server pg-globex")
	refused(t, aliceKubeconfig, database(acmeNS, "crossgrant", "grants: [{database: ledger, namespace: globex-dev, privileges: [SELECT]}]"),
		"spec.grants[0].namespace", "belongs to another tenant")
	refused(t, aliceKubeconfig, database(acmeNS, "cycle", "dependsOn: [{kind: Widget, name: x}]"), "spec.dependsOn[0].kind")
	// databaseName is immutable once set.
	apply(t, aliceKubeconfig, database(acmeNS, "named", "databaseName: acme_named"))
	_, errOut, err := kubectl(t, aliceKubeconfig, "", "patch", "database", "named", "-n", acmeNS, "--type=merge", "-p", `{"spec":{"databaseName":"acme_other"}}`)
	if err == nil || !strings.Contains(errOut, "immutable") {
		t.Fatalf("changing databaseName: %v %s", err, errOut)
	}
	// Bob may use the entry limited to his tenant.
	apply(t, bobKubeconfig, database(globexNS, "own-server", "server: pg-globex"))
	waitFor(t, bobKubeconfig, 60*time.Second, "{.status.phase}/{.status.server}", "Active/pg-globex", "database", "own-server", "-n", globexNS)
}

func TestDatabaseGrants(t *testing.T) {
	apply(t, aliceKubeconfig, database(acmeNS, "reporting", ""))
	apply(t, aliceKubeconfig, database(acmeNS, "sales", "grants: [{database: reporting, privileges: [SELECT]}]"))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "sales", "-n", acmeNS)
	sales := secretData(t, acmeNS, "sales-database")
	if _, err := psql(sales["uri"], "CREATE TABLE figures (n int); INSERT INTO figures VALUES (42); SELECT 1"); err != nil {
		t.Fatal(err)
	}
	rep := secretData(t, acmeNS, "reporting-database")
	onSales := withDB(t, rep["uri"], "acme_dev_sales")
	if out, err := psql(onSales, "SELECT n FROM figures"); err != nil || out != "42" {
		t.Fatalf("granted SELECT: %q %v", out, err)
	}
	if out, err := psql(onSales, "INSERT INTO figures VALUES (1)"); err == nil {
		t.Fatalf("INSERT was not granted but worked: %q", out)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// withDB is uri with its database replaced.
func withDB(t *testing.T, uri, db string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}
