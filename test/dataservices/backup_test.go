package dataservices

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"kubeos.dev/kube/internal/platform"
)

func backupYAML(ns, name, extra string) string {
	return fmt.Sprintf("apiVersion: kubeos.dev/v1alpha1\nkind: Backup\nmetadata: {name: %s, namespace: %s}\nspec: {%s}\n", name, ns, extra)
}

// archives lists a Backup's archives in its bucket, as the store's admin.
func archives(t *testing.T, bucket, ns, name string) []string {
	t.Helper()
	objs, err := s3Admin().List(context.Background(), bucket, platform.BackupPrefix(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// TestBackupScheduled backs a Topic up on a seconds schedule ("*/5 * * * * *": robfig/cron
// with the optional seconds field) with keepLast 1: it runs at least twice, only the newest
// archive is left, and a new Topic restores from it.
func TestBackupScheduled(t *testing.T) {
	embeddedServers(t)
	ctx := context.Background()
	apply(t, aliceKubeconfig, topic(acmeNS, "orders", `subjects: ["acme.orders.>"]`))
	apply(t, aliceKubeconfig, bucket(acmeNS, "backups", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "topic", "orders", "-n", acmeNS)
	nc, err := natsAs(secretData(t, acmeNS, "orders-topic"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for i := range 5 {
		if _, err := js.Publish(ctx, fmt.Sprintf("acme.orders.o%d", i), []byte(fmt.Sprintf("order %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, aliceKubeconfig, backupYAML(acmeNS, "orders-often", `source: {kind: Topic, name: orders}, target: {bucket: backups}, schedule: "*/5 * * * * *", retention: {keepLast: 1}, deletionPolicy: Delete`))

	seen := map[string]bool{}
	eventually(t, 90*time.Second, func() error {
		a := jsonpath(t, aliceKubeconfig, "{.status.lastSuccessful.archive}", "backup", "orders-often", "-n", acmeNS)
		if a != "" {
			seen[a] = true
		}
		if len(seen) < 2 {
			f := jsonpath(t, aliceKubeconfig, "{.status.lastFailure.error}", "backup", "orders-often", "-n", acmeNS)
			return fmt.Errorf("archives seen %v (last failure %q)", seen, f)
		}
		return nil
	})
	if _, errOut, err := kubectl(t, aliceKubeconfig, "", "patch", "backup", "orders-often", "-n", acmeNS, "--type=merge", "-p", `{"spec":{"suspend":true}}`); err != nil {
		t.Fatalf("suspend: %v: %s", err, errOut)
	}
	// Once suspended (no nextRun), the bucket holds the last archive only.
	waitFor(t, aliceKubeconfig, 30*time.Second, "{.status.nextRun}", "", "backup", "orders-often", "-n", acmeNS)
	last := jsonpath(t, aliceKubeconfig, "{.status.lastSuccessful.archive}", "backup", "orders-often", "-n", acmeNS)
	eventually(t, 30*time.Second, func() error {
		if got := archives(t, "acme-dev-backups", acmeNS, "orders-often"); len(got) != 1 || got[0] != last {
			return fmt.Errorf("archives %v, want [%s]", got, last)
		}
		return nil
	})
	if !strings.HasPrefix(last, "acme-dev/orders-often/") || !strings.HasSuffix(last, ".jetstream") {
		t.Errorf("archive key %q", last)
	}
	if h := jsonpath(t, aliceKubeconfig, "{.status.history[*].archive}", "backup", "orders-often", "-n", acmeNS); h != last {
		t.Errorf("history %q, want %q", h, last)
	}

	t.Run("a Topic restores from it", func(t *testing.T) {
		apply(t, aliceKubeconfig, topic(acmeNS, "orders-copy", `subjects: ["acme.orderscopy.>"], restoreFrom: {backup: orders-often}`))
		waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}/{.status.messages}", "Active/5", "topic", "orders-copy", "-n", acmeNS)
		st, err := natsAdmin(t).JetStream().Stream(ctx, "acme-dev_orders-copy")
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(ctx, 5)
		if err != nil || m.Subject != "acme.orderscopy.o4" || string(m.Data) != "order 4" {
			t.Errorf("last restored message %+v, %v", m, err)
		}
	})

	t.Run("bad schedules and restores from another kind are refused", func(t *testing.T) {
		refused(t, aliceKubeconfig, backupYAML(acmeNS, "bad-cron", `source: {kind: Topic, name: orders}, target: {bucket: backups}, schedule: "every minute"`), "schedule")
		refused(t, aliceKubeconfig, backupYAML(acmeNS, "bad-tz", `source: {kind: Topic, name: orders}, target: {bucket: backups}, schedule: "0 2 * * *", timeZone: Mars/Olympus`), "timeZone")
		refused(t, aliceKubeconfig, backupYAML(acmeNS, "bad-kind", `source: {kind: Secret, name: orders}, target: {bucket: backups}`), "source.kind")
		refused(t, aliceKubeconfig, cache(acmeNS, "from-topic", "restoreFrom: {backup: orders-often}"), "backs up a Topic")
	})

	t.Run("deletionPolicy Delete removes the archives", func(t *testing.T) {
		if _, errOut, err := kubectl(t, aliceKubeconfig, "", "delete", "backup", "orders-often", "-n", acmeNS, "--wait=true", "--timeout=60s"); err != nil {
			t.Fatalf("delete: %v: %s", err, errOut)
		}
		if got := archives(t, "acme-dev-backups", acmeNS, "orders-often"); len(got) != 0 {
			t.Errorf("archives left: %v", got)
		}
	})
}

// TestBackupDatabaseRestore: rows written, a pg_dump backup, the database dropped behind the
// platform's back, a new Database restored from the Backup has the rows.
func TestBackupDatabaseRestore(t *testing.T) {
	embeddedServers(t)
	apply(t, aliceKubeconfig, database(acmeNS, "shop", "schemas: [app]"))
	apply(t, aliceKubeconfig, bucket(acmeNS, "dbbackups", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "shop", "-n", acmeNS)
	shop := secretData(t, acmeNS, "shop-database")
	if _, err := psql(shop["uri"], "CREATE TABLE app.items (id int primary key, name text); INSERT INTO app.items SELECT g, 'item ' || g FROM generate_series(1, 42) g; SELECT 1"); err != nil {
		t.Fatal(err)
	}
	apply(t, aliceKubeconfig, backupYAML(acmeNS, "shop-once", `source: {kind: Database, name: shop}, target: {bucket: dbbackups}`))
	waitFor(t, aliceKubeconfig, 90*time.Second, "{.status.phase}", "Active", "backup", "shop-once", "-n", acmeNS)
	eventually(t, 60*time.Second, func() error {
		if a := jsonpath(t, aliceKubeconfig, "{.status.lastSuccessful.archive}", "backup", "shop-once", "-n", acmeNS); !strings.HasSuffix(a, ".pgdump") {
			return fmt.Errorf("no archive yet (last failure %q)", jsonpath(t, aliceKubeconfig, "{.status.lastFailure.error}", "backup", "shop-once", "-n", acmeNS))
		}
		return nil
	})
	if size := jsonpath(t, aliceKubeconfig, "{.status.lastSuccessful.sizeBytes}", "backup", "shop-once", "-n", acmeNS); size == "" || size == "0" {
		t.Errorf("archive size %q", size)
	}
	dbname := jsonpath(t, aliceKubeconfig, "{.status.databaseName}", "database", "shop", "-n", acmeNS)
	adminExec(t, fmt.Sprintf("DROP DATABASE %q WITH (FORCE)", dbname))

	apply(t, aliceKubeconfig, database(acmeNS, "shop-restored", "restoreFrom: {backup: shop-once}"))
	waitFor(t, aliceKubeconfig, 90*time.Second, "{.status.phase}", "Active", "database", "shop-restored", "-n", acmeNS)
	restored := secretData(t, acmeNS, "shop-restored-database")
	got, err := psql(restored["uri"], "SELECT count(*) || ' ' || max(name) FROM app.items")
	if err != nil || got != "42 item 9" {
		t.Fatalf("restored rows: %q, %v", got, err)
	}
	if _, err := psql(restored["uri"], "INSERT INTO app.items VALUES (43, 'mine'); SELECT 1"); err != nil {
		t.Errorf("the restored database's role cannot write its tables: %v", err)
	}
}
