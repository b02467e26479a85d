package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/storage"
)

const svmCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"gauges.svm.example.com"},
 "spec":{"group":"svm.example.com","scope":"Namespaced",
  "names":{"plural":"gauges","singular":"gauge","kind":"Gauge","listKind":"GaugeList"},
  "versions":[
   {"name":"v1alpha1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"level":{"type":"integer"}}}}}}},
   {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"level":{"type":"integer"}}}}}}}]}}`

// TestStorageVersionMigration: objects an older server stored in a version that is no
// longer the storage version are rewritten in the storage version by a
// StorageVersionMigration, which reports Running, its resourceVersion and Succeeded as
// upstream's controller does; a migration of a resource that is not served fails.
func TestStorageVersionMigration(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, cfg := clients(t)
	ctx := ctxT(t, 3*time.Minute)
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crdFromJSON(t, svmCRD), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "gauges.svm.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	gauges := dyn.Resource(schema.GroupVersionResource{Group: "svm.example.com", Version: "v1", Resource: "gauges"}).Namespace("default")
	names := []string{"a", "b", "c"}
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		_, err := gauges.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "svm.example.com/v1", "kind": "Gauge",
			"metadata": map[string]any{"name": names[0]}, "spec": map[string]any{"level": int64(1)}}}, metav1.CreateOptions{})
		return err
	})
	for _, n := range names[1:] {
		if _, err := gauges.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "svm.example.com/v1", "kind": "Gauge",
			"metadata": map[string]any{"name": n}, "spec": map[string]any{"level": int64(1)}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What an older server left: a and b stored as v1alpha1 (written under the API's back).
	for _, n := range names[:2] {
		key := storage.Key("svm.example.com", "gauges", "default", n)
		if _, err := crdSrv.Inner().Store.GuaranteedUpdate(ctx, key, storage.UpdateOptions{}, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			cur.SetAPIVersion("svm.example.com/v1alpha1")
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := storedObject(t, "svm.example.com", "gauges", n).GetAPIVersion(); got != "svm.example.com/v1alpha1" {
			t.Fatalf("%s stored as %s before the migration", n, got)
		}
	}

	svms := kc.StoragemigrationV1().StorageVersionMigrations()
	if _, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "gauges"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "svm.example.com", Resource: "gauges"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := waitMigration(t, ctx, kc, "gauges", svmv1.MigrationSucceeded)
	if done.Status.ResourceVersion == "" {
		t.Errorf("status.resourceVersion not set: %+v", done.Status)
	}
	if c := meta.FindStatusCondition(done.Status.Conditions, string(svmv1.MigrationSucceeded)); c.Reason != "StorageVersionMigrationSucceeded" {
		t.Errorf("Succeeded reason %q", c.Reason)
	}
	for _, n := range names {
		if got := storedObject(t, "svm.example.com", "gauges", n).GetAPIVersion(); got != "svm.example.com/v1" {
			t.Errorf("%s stored as %s after the migration, want v1", n, got)
		}
	}
	// The runner ends the migration: Running=False MigrationCompleted.
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		s, err := svms.Get(ctx, "gauges", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, string(svmv1.MigrationRunning)); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Running: %+v", c)
		}
		return nil
	})

	// A resource nobody serves fails after upstream's one-minute grace for discovery; the
	// migration was created when the package started (createUnservedMigration), so the
	// grace passed while the other tests ran.
	failed := waitMigration(t, ctx, kc, unservedMigration, svmv1.MigrationFailed)
	if c := meta.FindStatusCondition(failed.Status.Conditions, string(svmv1.MigrationFailed)); !strings.Contains(c.Message, "discovery") {
		t.Errorf("Failed message %q", c.Message)
	}
}

const unservedMigration = "nothing"

// createUnservedMigration creates a StorageVersionMigration of a resource nobody serves.
func createUnservedMigration() error {
	cfg, err := crdSrv.Config()
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = kc.StoragemigrationV1().StorageVersionMigrations().Create(context.Background(), &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: unservedMigration},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "nothing.example.com", Resource: "things"}}}, metav1.CreateOptions{})
	return err
}

func waitMigration(t *testing.T, ctx context.Context, kc kubernetes.Interface, name string, cond svmv1.MigrationConditionType) *svmv1.StorageVersionMigration {
	t.Helper()
	var last *svmv1.StorageVersionMigration
	for ctx.Err() == nil {
		s, err := kc.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = s
			if meta.IsStatusConditionTrue(s.Status.Conditions, string(cond)) {
				return s
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("migration %s never %s: %+v\nserver log:\n%s", name, cond, last, tail(serverLog.String(), 4000))
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
