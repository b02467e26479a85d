package dataservices

import (
	"testing"
	"time"
)

// dependsOn on the data kinds: the engine waits for what is named and refuses cycles with
// the path.
func TestDependsOn(t *testing.T) {
	apply(t, aliceKubeconfig, database(acmeNS, "waits", "dependsOn: [{kind: Cache, name: later}]"))
	waitFor(t, aliceKubeconfig, 30*time.Second, `{.status.conditions[?(@.type=="DependenciesReady")].status}`, "False", "database", "waits", "-n", acmeNS)
	if got := jsonpath(t, aliceKubeconfig, "{.status.phase}", "database", "waits", "-n", acmeNS); got == "Active" {
		t.Fatal("Active before its dependency exists")
	}
	apply(t, aliceKubeconfig, cache(acmeNS, "later", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "database", "waits", "-n", acmeNS)

	apply(t, aliceKubeconfig, database(acmeNS, "ring-a", "dependsOn: [{kind: Database, name: ring-b}]"))
	refused(t, aliceKubeconfig, database(acmeNS, "ring-b", "dependsOn: [{kind: Database, name: ring-a}]"),
		"dependency cycle: Database/acme-dev/ring-b → Database/acme-dev/ring-a → Database/acme-dev/ring-b")
	refused(t, aliceKubeconfig, database(acmeNS, "elsewhere", "dependsOn: [{kind: Database, name: ledger, namespace: globex-dev}]"),
		"spec.dependsOn[0].namespace", "belongs to another tenant")
}
