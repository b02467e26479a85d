// Package dataservices tests the data kinds end to end against one in-process server and
// real servers started here on free ports (PostgreSQL 15 and redis-server 7, Debian's
// packages; the tests fail, never skip, without them or kubectl.1.33), registered as server
// entries: tenants' users create Databases and Caches with kubectl 1.33 and use what they
// get with psql and a Redis client; another tenant's role and user reach nothing of theirs;
// rotation, Retain/Delete, drift, an unreachable server, bad input and audit redaction.
package dataservices

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"kubeos.dev/kube/internal/dataservices/servers/testservers"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

// driftPeriod is the periodic observe of Active data objects in these tests.
const driftPeriod = 5 * time.Second

// alertInterval is the Alerts' evaluation interval in these tests (15 s by default).
const alertInterval = 2 * time.Second

var (
	srv       *servertest.Server
	serverLog servertest.Buffer
	auditLog  string
	dataDir   string
	// pg and rd are the real servers, registered as the default entries pg-main and
	// redis-main.
	pg *testservers.Postgres
	rd *testservers.Redis
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	main := &testservers.Main{}
	defer main.Close()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(os.Stderr, "dataservices:", r)
			code = 1
		}
	}()
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dataservices:", err)
		return 1
	}
	dataDir = dir
	main.Cleanup(func() { os.RemoveAll(dir) })
	pg = testservers.StartPostgres(main)
	rd = testservers.StartRedis(main)
	auditLog = filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
  resources: [{group: "", resources: [secrets]}, {group: kubeos.dev}]
- level: None
`), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "dataservices:", err)
		return 1
	}
	srv, err = servertest.StartWith(filepath.Join(dir, "kube"), &serverLog, func(o *server.Options) {
		o.AuditPolicyFile, o.AuditLogPath = policy, auditLog
		o.DriftCheckPeriod = driftPeriod
		o.AlertInterval = alertInterval
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "dataservices: start server: %v\n%s", err, serverLog.String())
		return 1
	}
	defer srv.Stop()
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "dataservices: setup: %v\n", err)
		return 1
	}
	code = m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- server log (last 200 lines) ---\n%s\n", tail(serverLog.String(), 200))
	}
	return code
}
