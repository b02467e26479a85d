package api

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestConflictingShortNameKeepsCRDServed: re-applying an established CRD with a short name
// another CRD of its group holds refuses that name only (NamesAccepted=False, reason
// ShortNamesConflict); the CRD stays Established and its custom resources stay reachable
// under the names it had, as with kube-apiserver. Dropping the name accepts the names again.
func TestConflictingShortNameKeepsCRDServed(t *testing.T) {
	crdSuite.Need(t)
	ext, _, cfg := clients(t)
	ctx := ctxT(t, 2*time.Minute)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	bin, err := findKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	k := &kubectlRun{t: t, bin: bin, home: t.TempDir()}
	raw, err := os.ReadFile("testdata/database-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	database := string(raw)
	conflicting := strings.Replace(database, "    shortNames:\n    - db\n", "    shortNames:\n    - db\n    - th\n", 1)
	if conflicting == database {
		t.Fatal("testdata/database-crd.yaml has no shortNames [db] to add th to")
	}

	things := simpleCRD(t, "db.example.com", "things", "Thing", "th")
	if _, err := crds.Create(ctx, things, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), things.Name, metav1.DeleteOptions{}) })
	waitCondition(t, ext, things.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	// The Database may be refused the first time (the CRD is not established yet).
	_, _ = k.run(database, "apply", "-f", "-")
	k.ok("", "wait", "--for", "condition=Established", "crd/databases.db.example.com", "--timeout=30s")
	k.ok(database, "apply", "-f", "-")

	k.ok(conflicting, "apply", "-f", "-")
	var crd *apiextensionsv1.CustomResourceDefinition
	servertest.Eventually(t, 15*time.Second, 20*time.Millisecond, func() error {
		crd, err = crds.Get(ctx, "databases.db.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := findCondition(crd, apiextensionsv1.NamesAccepted); c == nil || c.Status != apiextensionsv1.ConditionFalse {
			return fmt.Errorf("NamesAccepted %+v, want False", c)
		}
		return nil
	})
	if c := findCondition(crd, apiextensionsv1.NamesAccepted); c.Reason != "ShortNamesConflict" || c.Message != `"th" is already in use` {
		t.Errorf("NamesAccepted: %+v, want reason ShortNamesConflict and message %q", *c, `"th" is already in use`)
	}
	if c := findCondition(crd, apiextensionsv1.Established); c == nil || c.Status != apiextensionsv1.ConditionTrue {
		t.Errorf("Established: %+v, want True", c)
	}
	if got := crd.Status.AcceptedNames.ShortNames; !slices.Equal(got, []string{"db"}) {
		t.Errorf("acceptedNames.shortNames %v, want [db]", got)
	}

	// The Database is still served, under the plural and its old short name; discovery
	// lists the accepted short names only.
	for _, resource := range []string{"databases", "db"} {
		if got := k.ok("", "get", resource, "order-db", "-n", "default", "-o", "jsonpath={.spec.engine}"); got != "postgresql" {
			t.Errorf("kubectl get %s order-db: %q, want postgresql", resource, got)
		}
	}
	k.ok("", "get", "--raw", "/apis/db.example.com/v1alpha1")
	list, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerResourcesForGroupVersion("db.example.com/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.APIResources {
		if r.Name == "databases" && !slices.Equal(r.ShortNames, []string{"db"}) {
			t.Errorf("discovery: databases short names %v, want [db]", r.ShortNames)
		}
		if r.Name == "things" && !slices.Equal(r.ShortNames, []string{"th"}) {
			t.Errorf("discovery: things short names %v, want [th]", r.ShortNames)
		}
	}

	// Without the conflicting short name, every name is accepted again.
	k.ok(database, "apply", "-f", "-")
	servertest.Eventually(t, 15*time.Second, 20*time.Millisecond, func() error {
		crd, err = crds.Get(ctx, "databases.db.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := findCondition(crd, apiextensionsv1.NamesAccepted); c == nil || c.Status != apiextensionsv1.ConditionTrue {
			return fmt.Errorf("NamesAccepted %+v, want True", c)
		}
		return nil
	})
	if c := findCondition(crd, apiextensionsv1.Established); c == nil || c.Status != apiextensionsv1.ConditionTrue {
		t.Errorf("Established: %+v, want True", c)
	}
	if got := k.ok("", "get", "db", "order-db", "-n", "default", "-o", "jsonpath={.metadata.name}"); got != "order-db" {
		t.Errorf("kubectl get db order-db after the fix: %q", got)
	}
}
