package apps

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.gc.example.com
spec:
  group: gc.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

// ensureWidgets creates the Widget CRD once and waits until kubectl can use it.
func ensureWidgets(t *testing.T) {
	t.Helper()
	kIn(t, widgetCRD, "apply", "-f", "-")
	k(t, "wait", "--for=condition=Established", "crd/widgets.gc.example.com", "--timeout=30s")
	controllersEventually(t, 30*time.Second, "widgets served", func() (bool, string) {
		out, err := kTry("get", "widgets", "-A")
		return err == nil, out
	})
}

func widget(ns, name, extraMeta string) string {
	return fmt.Sprintf("apiVersion: gc.example.com/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: %s\n%sspec:\n  size: 3\n", name, ns, extraMeta)
}

// TestNamespaceDeletion: a namespace with built-in objects and custom resources, one held by
// a finalizer, turns Terminating with the condition that says what blocks it; once the
// finalizer is removed the namespace disappears.
func TestNamespaceDeletion(t *testing.T) {
	controllersSuite.Need(t)
	ensureWidgets(t)
	ns := "ns-delete"
	k(t, "create", "namespace", ns)
	k(t, "create", "configmap", "plain", "-n", ns, "--from-literal=a=b")
	k(t, "create", "secret", "generic", "creds", "-n", ns, "--from-literal=p=q")
	kIn(t, widget(ns, "w1", ""), "create", "-f", "-")
	kIn(t, widget(ns, "held", "  finalizers: [\"example.com/hold\"]\n"), "create", "-f", "-")

	k(t, "delete", "namespace", ns, "--wait=false")
	controllersEventually(t, 30*time.Second, "namespace Terminating with the blocking conditions", func() (bool, string) {
		out := k(t, "get", "namespace", ns, "-o", `jsonpath={.status.phase}{range .status.conditions[*]}|{.type}={.status}:{.message}{end}`)
		return strings.HasPrefix(out, "Terminating") &&
			strings.Contains(out, "NamespaceFinalizersRemaining=True:Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"), out
	})
	// As upstream's namespace storage: a deletionTimestamp, no deletionGracePeriodSeconds.
	if out := k(t, "get", "namespace", ns, "-o", `jsonpath={.metadata.deletionTimestamp}|{.metadata.deletionGracePeriodSeconds}`); !strings.HasSuffix(out, "|") || out == "|" {
		t.Errorf("deletionTimestamp|deletionGracePeriodSeconds of the Terminating namespace: %q", out)
	}
	cond := k(t, "get", "namespace", ns, "-o", `jsonpath={range .status.conditions[*]}{.type}={.status}:{.message}{"\n"}{end}`)
	if !strings.Contains(cond, "NamespaceContentRemaining=True:Some resources are remaining: widgets.gc.example.com has 1 resource instances") {
		t.Fatalf("conditions: %s\nwant NamespaceContentRemaining naming widgets.gc.example.com", cond)
	}
	// Everything but the held widget is gone.
	if out := k(t, "get", "configmaps,secrets", "-n", ns, "-o", "name"); strings.Contains(out, "configmap/plain") || strings.Contains(out, "secret/creds") {
		t.Fatalf("built-in content still there: %s", out)
	}
	if out := k(t, "get", "widgets", "-n", ns, "-o", "name"); out != "widget.gc.example.com/held" {
		t.Fatalf("widgets left: %q, want only the held one", out)
	}
	k(t, "patch", "widget", "held", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	k(t, "wait", "--for=delete", "namespace/"+ns, "--timeout=30s")
	out := k(t, "get", "events.events.k8s.io", "-n", "default", "-o", "jsonpath={range .items[*]}{.reason}/{.regarding.name}{\"\\n\"}{end}")
	for _, want := range []string{"DeletingContent/" + ns, "ContentDeleted/" + ns} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s event; events in default:\n%s", want, out)
		}
	}
}

// TestCustomResourceGarbageCollection: custom resources take part in the ownerReferences
// graph like any built-in kind, as owners and as dependents.
func TestCustomResourceGarbageCollection(t *testing.T) {
	controllersSuite.Need(t)
	ensureWidgets(t)
	ns := "gc-custom"
	k(t, "create", "namespace", ns)
	k(t, "create", "configmap", "owner", "-n", ns)
	uid := k(t, "get", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	kIn(t, widget(ns, "child", fmt.Sprintf("  ownerReferences:\n  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: %s}\n", uid)), "create", "-f", "-")
	wuid := k(t, "get", "widget", "child", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	k(t, "create", "configmap", "grandchild", "-n", ns)
	k(t, "patch", "configmap", "grandchild", "-n", ns, "--type=merge", "-p",
		fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"gc.example.com/v1","kind":"Widget","name":"child","uid":"%s"}]}}`, wuid))
	k(t, "delete", "configmap", "owner", "-n", ns)
	controllersEventually(t, 30*time.Second, "custom resource dependent and its own dependent collected", func() (bool, string) {
		w := k(t, "get", "widgets", "-n", ns, "-o", "name")
		c := k(t, "get", "configmaps", "-n", ns, "-o", "name")
		return w == "" && !strings.Contains(c, "grandchild"), w + " | " + c
	})
}
