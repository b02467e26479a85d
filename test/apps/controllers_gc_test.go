package apps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

const dependents = 100

// setUp creates namespace ns, an owner ConfigMap and n dependents (label set=deps) whose
// ownerReferences have blockOwnerDeletion; the first held ones carry a finalizer.
func setUp(t *testing.T, cs *kubernetes.Clientset, ns string, n, held int) types.UID {
	t.Helper()
	ctx := context.Background()
	k(t, "create", "namespace", ns)
	k(t, "create", "configmap", "owner", "-n", ns, "--from-literal=role=owner")
	uid := types.UID(k(t, "get", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}"))
	block := true
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("dep-%03d", i), Labels: map[string]string{"set": "deps"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: uid, BlockOwnerDeletion: &block}},
			}}
			if i < held {
				cm.Finalizers = []string{"example.com/hold"}
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return uid
}

// countDeps counts the dependents still present (with kubectl).
func countDeps(t *testing.T, ns string) int {
	t.Helper()
	out := k(t, "get", "configmaps", "-n", ns, "-l", "set=deps", "-o", "name")
	if out == "" {
		return 0
	}
	return len(strings.Split(out, "\n"))
}

func TestCascadeBackground(t *testing.T) {
	controllersSuite.Need(t)
	cs := controllersClientset(t)
	ns := "gc-background"
	setUp(t, cs, ns, dependents, 0)
	if got := countDeps(t, ns); got != dependents {
		t.Fatalf("%d dependents before the delete, want %d", got, dependents)
	}
	start := time.Now()
	// kubectl returns once the owner is gone; its dependents follow.
	k(t, "delete", "configmap", "owner", "-n", ns, "--cascade=background")
	controllersEventually(t, 30*time.Second, "dependents deleted after the owner", func() (bool, string) {
		n := countDeps(t, ns)
		return n == 0, fmt.Sprintf("%d dependents left", n)
	})
	t.Logf("%d dependents collected in %s", dependents, time.Since(start).Round(time.Millisecond))
	// The collector reports what it did on the owner.
	controllersEventually(t, 10*time.Second, "DependentsDeleted event", func() (bool, string) {
		out := k(t, "get", "events.events.k8s.io", "-n", ns, "-o", "jsonpath={range .items[*]}{.reason}/{.regarding.name}{\"\\n\"}{end}")
		return strings.Contains(out, "DependentsDeleted/owner"), out
	})
}

func TestCascadeForeground(t *testing.T) {
	controllersSuite.Need(t)
	cs := controllersClientset(t)
	ns := "gc-foreground"
	const held = 10
	setUp(t, cs, ns, dependents, held)
	k(t, "delete", "configmap", "owner", "-n", ns, "--cascade=foreground", "--wait=false")
	// The dependents without finalizers go; the held ones are marked and block the owner.
	controllersEventually(t, 30*time.Second, "unheld dependents deleted", func() (bool, string) {
		n := countDeps(t, ns)
		return n == held, fmt.Sprintf("%d dependents left", n)
	})
	marked := k(t, "get", "configmaps", "-n", ns, "-l", "set=deps", "-o", "jsonpath={range .items[*]}{.metadata.deletionTimestamp}{\"\\n\"}{end}")
	if got := len(strings.Fields(marked)); got != held {
		t.Fatalf("%d held dependents have a deletionTimestamp, want %d", got, held)
	}
	owner := k(t, "get", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.finalizers} {.metadata.deletionTimestamp}")
	if !strings.Contains(owner, "foregroundDeletion") || !strings.Contains(owner, "T") {
		t.Fatalf("owner while blocking dependents exist: %q, want the foregroundDeletion finalizer and a deletionTimestamp", owner)
	}
	// Still there a moment later: the collector does not give up on it.
	time.Sleep(500 * time.Millisecond)
	k(t, "get", "configmap", "owner", "-n", ns)
	for i := range held {
		k(t, "patch", "configmap", fmt.Sprintf("dep-%03d", i), "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	}
	k(t, "wait", "--for=delete", "configmap/owner", "-n", ns, "--timeout=30s")
	if n := countDeps(t, ns); n != 0 {
		t.Fatalf("%d dependents left after the owner went", n)
	}
}

func TestCascadeOrphan(t *testing.T) {
	controllersSuite.Need(t)
	cs := controllersClientset(t)
	ns := "gc-orphan"
	setUp(t, cs, ns, dependents, 0)
	k(t, "delete", "configmap", "owner", "-n", ns, "--cascade=orphan", "--timeout=30s")
	if n := countDeps(t, ns); n != dependents {
		t.Fatalf("%d dependents after an orphaning delete, want all %d", n, dependents)
	}
	refs := k(t, "get", "configmaps", "-n", ns, "-l", "set=deps", "-o", "jsonpath={.items[*].metadata.ownerReferences}")
	if refs != "" {
		t.Fatalf("orphaned dependents still have ownerReferences: %.200s", refs)
	}
	controllersEventually(t, 10*time.Second, "OrphanedDependents event", func() (bool, string) {
		out := k(t, "get", "events.events.k8s.io", "-n", ns, "-o", "jsonpath={range .items[*]}{.reason}: {.note}{\"\\n\"}{end}")
		return strings.Contains(out, "OrphanedDependents: removed the ownerReference to this object from "+strconv.Itoa(dependents)+" dependents"), out
	})
}

// TestDanglingAndInvalidReferences: a dependent whose owner never existed is collected; one
// whose owner lives in another namespace is collected as if the owner were absent (upstream);
// a cluster-scoped dependent naming a namespaced owner stays, with a Warning event.
func TestDanglingAndInvalidReferences(t *testing.T) {
	controllersSuite.Need(t)
	k(t, "create", "namespace", "gc-refs-a")
	k(t, "create", "namespace", "gc-refs-b")
	k(t, "create", "configmap", "owner", "-n", "gc-refs-a")
	uid := k(t, "get", "configmap", "owner", "-n", "gc-refs-a", "-o", "jsonpath={.metadata.uid}")
	dep := func(kind, name, ns, ownerName, ownerUID string) string {
		meta := "name: " + name
		if ns != "" {
			meta += "\n  namespace: " + ns
		}
		return fmt.Sprintf(`apiVersion: v1
kind: %s
metadata:
  %s
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: %s
    uid: %s
`, kind, meta, ownerName, ownerUID)
	}
	kIn(t, dep("ConfigMap", "ghost-child", "gc-refs-a", "ghost", "6a3c1f5e-0000-4000-8000-000000000001"), "create", "-f", "-")
	kIn(t, dep("ConfigMap", "foreign-child", "gc-refs-b", "owner", uid), "create", "-f", "-")
	kIn(t, dep("Namespace", "gc-refs-cluster-child", "", "owner", uid), "create", "-f", "-")

	controllersEventually(t, 30*time.Second, "dangling and cross-namespace dependents collected", func() (bool, string) {
		a, _ := kTry("get", "configmap", "ghost-child", "-n", "gc-refs-a", "-o", "name")
		b, _ := kTry("get", "configmap", "foreign-child", "-n", "gc-refs-b", "-o", "name")
		return !strings.HasPrefix(a, "configmap/") && !strings.HasPrefix(b, "configmap/"), a + " | " + b
	})
	k(t, "get", "configmap", "owner", "-n", "gc-refs-a") // the real owner is untouched
	controllersEventually(t, 30*time.Second, "OwnerRefInvalidNamespace event for the cluster-scoped dependent", func() (bool, string) {
		out := k(t, "get", "events.events.k8s.io", "-A", "-o", "jsonpath={range .items[*]}{.reason}/{.regarding.kind}/{.regarding.name}{\"\\n\"}{end}")
		return strings.Contains(out, "OwnerRefInvalidNamespace/Namespace/gc-refs-cluster-child"), out
	})
	k(t, "get", "namespace", "gc-refs-cluster-child") // not collected
}
