package ctl

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/internal/server/servertest"
)

// scenario is shared by the subtests of TestScenario, in order.
const scenario = `apiVersion: kubeos.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec: {environments: [dev]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Quota
metadata: {name: acme-quota}
spec: {tenant: acme, limits: [{resource: configmaps, namespace: acme-dev, max: 100}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: AccessPolicy
metadata: {name: alice-dev}
spec: {tenant: acme, subjects: [{kind: User, name: alice}], allowedEnvs: [dev]}
---
apiVersion: kubeos.dev/v1alpha1
kind: SecretPolicy
metadata: {name: app-secrets, namespace: policies}
spec:
  rules: [{secretNames: ["app-*"], kinds: [Deployment]}]
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: root-ca, namespace: shop}
spec: {isCA: true, commonName: root-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: web, namespace: shop}
spec: {dnsNames: [web.example.com], issuer: root-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: app, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Certificate, name: web}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: client, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: app}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: both, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: app}, {kind: Certificate, name: web}]}
---
apiVersion: v1
kind: Secret
metadata: {name: taken, namespace: shop}
stringData: {password: not-managed}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: taken, namespace: shop}
spec: {type: password, length: 16}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: consumer, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: taken}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: orphan, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Certificate, name: nope}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: held, namespace: shop, finalizers: [example.com/hold]}
spec: {type: password, length: 16}
`

func TestScenario(t *testing.T) {
	ctlSuite.Need(t)
	k := newKubectl(t)
	k.ok(t, "", "create", "namespace", "shop")
	k.ok(t, "", "create", "namespace", "policies")
	k.ok(t, "", "create", "namespace", "elsewhere")
	k.apply(t, scenario)
	k.apply(t, "apiVersion: kubeos.dev/v1alpha1\nkind: Credential\nmetadata: {name: secret-one, namespace: elsewhere}\nspec: {type: password}\n")
	for _, o := range [][]string{{"tenant", "acme"}, {"quota", "acme-quota"}, {"accesspolicy", "alice-dev"},
		{"secretpolicy", "app-secrets", "-n", "policies"}, {"certificate", "root-ca", "-n", "shop"}, {"certificate", "web", "-n", "shop"},
		{"credential", "app", "-n", "shop"}, {"credential", "client", "-n", "shop"}, {"credential", "both", "-n", "shop"},
		{"credential", "held", "-n", "shop"}, {"credential", "secret-one", "-n", "elsewhere"}} {
		k.waitPhase(t, "Active", o...)
	}
	k.waitPhase(t, "Failed", "credential", "taken", "-n", "shop")
	k.waitPhase(t, "Pending", "credential", "consumer", "-n", "shop")
	k.waitPhase(t, "Pending", "credential", "orphan", "-n", "shop")

	viewer := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	if r := runBin(t, kubeBin, "certs", "user", "viewer", "--data-dir", srv.DataDir, "-o", viewer); r.code != 0 {
		t.Fatalf("kube certs user: %s", r)
	}
	k.ok(t, "", "create", "rolebinding", "viewer-view", "-n", "shop", "--clusterrole=view", "--user=viewer")
	// The view role aggregates the ops API's role once the server has created it.
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		r := ctl(t, viewer, "health", "-n", "shop")
		if r.code != 0 && r.code != 2 {
			return fmt.Errorf("viewer health: %s", r)
		}
		return nil
	})

	t.Run("health counts phases, names the failure and exits 2", func(t *testing.T) {
		r := ctl(t, srv.Kubeconfig, "health", "-n", "shop")
		if r.code != 2 || !strings.Contains(r.err, "Credential: 1 failed") {
			t.Fatalf("want exit 2 naming the failed Credential: %s", r)
		}
		for _, want := range []string{"KIND", "PENDING", "RECONCILING", "ACTIVE", "FAILED", "STALLED", "OLDEST RECONCILING", "P99", "ERRORS", "Credential", "Certificate", "event bus memory: healthy"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("health output lacks %q:\n%s", want, r.out)
			}
		}
		var l opsapi.HealthList
		r = ctl(t, srv.Kubeconfig, "health", "-n", "shop", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &l); err != nil {
			t.Fatalf("health -o json: %v\n%s", err, r)
		}
		got := map[string]opsapi.KindHealth{}
		for _, h := range l.Items {
			got[h.Kind] = h
		}
		// shop: 7 Credentials (app, client, both, held Active; taken Failed; consumer, orphan Pending), 2 Certificates.
		if c := got["Credential"]; c.Total != 7 || c.Phases["Active"] != 4 || c.Failed != 1 || c.Stalled != 1 || c.Phases["Pending"] != 2 {
			t.Errorf("Credential health in shop: %+v", c)
		}
		if c := got["Certificate"]; c.Total != 2 || c.Phases["Active"] != 2 {
			t.Errorf("Certificate health in shop: %+v", c)
		}
		if _, ok := got["Tenant"]; ok {
			t.Errorf("a namespace's health lists the cluster-scoped Tenant")
		}
		if c := got["Credential"]; c.Reconciles == 0 || c.Errors == 0 || c.ReconcileP99Seconds <= 0 {
			t.Errorf("Credential reconcile figures: %d reconciles, %d errors, p99 %vs", c.Reconciles, c.Errors, c.ReconcileP99Seconds)
		}
		// All namespaces: every kind, the cluster-scoped ones and elsewhere's Credential too.
		r = ctl(t, srv.Kubeconfig, "health", "-A", "-o", "json")
		l = opsapi.HealthList{}
		if err := json.Unmarshal([]byte(r.out), &l); err != nil {
			t.Fatalf("health -A -o json: %v\n%s", err, r)
		}
		got = map[string]opsapi.KindHealth{}
		for _, h := range l.Items {
			got[h.Kind] = h
		}
		for kind, n := range map[string]int{"Tenant": 1, "Quota": 1, "AccessPolicy": 1, "SecretPolicy": 1, "Credential": 8, "Certificate": 2} {
			if got[kind].Total < n {
				t.Errorf("health -A: %s total %d, want at least %d (%+v)", kind, got[kind].Total, n, got[kind])
			}
		}
		if r := ctl(t, srv.Kubeconfig, "health", "-A", "--kind", "tenant"); r.code != 0 || !strings.Contains(r.out, "Tenant") || strings.Contains(r.out, "Credential") {
			t.Errorf("health --kind tenant: %s", r)
		}
		if r := ctl(t, srv.Kubeconfig, "health", "--kind", "widgets"); r.code != 1 || !strings.Contains(r.err, `doesn't have a lifecycle-managed resource type "widgets"`) {
			t.Errorf("health --kind widgets: %s", r)
		}
	})

	t.Run("tree: a chain three deep, a diamond printed once, a missing dependency, dependents", func(t *testing.T) {
		out := ok(t, srv.Kubeconfig, "tree", "credential/client", "-n", "shop")
		want := []string{"client", "└─app", "  └─web", "    └─root-ca"}
		assertRows(t, out, want)
		for _, l := range lines(out)[1:] {
			if !strings.Contains(l, "True") || !strings.Contains(l, "Active") {
				t.Errorf("row not Ready/Active: %q", l)
			}
		}
		out = ok(t, srv.Kubeconfig, "tree", "credential/both", "-n", "shop")
		assertRows(t, out, []string{"both", "├─web", "│ └─root-ca", "└─app", "  └─web (↑ shown above)"})
		if n := strings.Count(out, "root-ca"); n != 1 {
			t.Errorf("root-ca printed %d times, want once:\n%s", n, out)
		}
		out = ok(t, srv.Kubeconfig, "tree", "credential/orphan", "-n", "shop")
		if !strings.Contains(out, "└─nope") || !strings.Contains(out, "Missing") || !strings.Contains(out, "NotFound") {
			t.Errorf("missing dependency not shown:\n%s", out)
		}
		out = ok(t, srv.Kubeconfig, "tree", "certificate/root-ca", "-n", "shop", "-D")
		for _, name := range []string{"web", "app", "client", "both"} {
			if !strings.Contains(out, name) {
				t.Errorf("dependents tree lacks %s:\n%s", name, out)
			}
		}
		out = ok(t, srv.Kubeconfig, "tree", "certificate/root-ca", "-n", "shop", "-D", "--depth", "1")
		if strings.Contains(out, "client") || !strings.Contains(out, "web") {
			t.Errorf("--depth 1 shows more or less than the direct dependents:\n%s", out)
		}
		var g opsapi.Graph
		if err := json.Unmarshal([]byte(ok(t, srv.Kubeconfig, "tree", "credential/client", "-n", "shop", "-o", "json")), &g); err != nil {
			t.Fatal(err)
		}
		if len(g.Nodes) != 4 || g.Root != "Credential/shop/client" {
			t.Errorf("tree -o json: root %s, %d nodes", g.Root, len(g.Nodes))
		}
		if out := ok(t, srv.Kubeconfig, "tree", "credential/client", "-n", "shop", "-o", "yaml"); !strings.Contains(out, "root: Credential/shop/client") {
			t.Errorf("tree -o yaml:\n%s", out)
		}
		dot := ok(t, srv.Kubeconfig, "tree", "credential/orphan", "-n", "shop", "-o", "dot")
		if !strings.HasPrefix(dot, "digraph") || !strings.Contains(dot, `"Credential/shop/orphan" -> "Certificate/shop/nope"`) || !strings.Contains(dot, "dashed") {
			t.Errorf("tree -o dot:\n%s", dot)
		}
		if out := ok(t, srv.Kubeconfig, "tree", "credential/orphan", "-n", "shop", "-o", "wide"); !strings.Contains(out, "MESSAGE") || !strings.Contains(out, "does not exist") {
			t.Errorf("tree -o wide:\n%s", out)
		}
	})

	t.Run("a cycle is refused at admission; tree still terminates", func(t *testing.T) {
		_, errOut, err := k.run(srv.Kubeconfig, "", "patch", "certificate", "root-ca", "-n", "shop", "--type=merge", "-p",
			`{"spec":{"dependsOn":[{"kind":"Credential","name":"client"}]}}`)
		if err == nil || !strings.Contains(errOut, "dependency cycle") {
			t.Fatalf("cycle not refused: %v %s", err, errOut)
		}
		assertRows(t, ok(t, srv.Kubeconfig, "tree", "credential/client", "-n", "shop"), []string{"client", "└─app", "  └─web", "    └─root-ca"})
	})

	t.Run("why points at the deepest blocker", func(t *testing.T) {
		out := ok(t, srv.Kubeconfig, "why", "credential/consumer", "-n", "shop")
		for _, want := range []string{"Credential/shop/consumer is Pending", "blocked by Credential/shop/taken", "Blocker: Credential/shop/taken",
			"Phase: Failed", "Stalled=True  SecretConflict: secret taken exists and is not managed by credential taken", "Last reconcile error:", "Next attempt:", "Events:"} {
			if !strings.Contains(out, want) {
				t.Errorf("why consumer lacks %q:\n%s", want, out)
			}
		}
		out = ok(t, srv.Kubeconfig, "why", "credential/orphan", "-n", "shop")
		if !strings.Contains(out, "Blocker: Certificate/shop/nope") || !strings.Contains(out, "It does not exist") {
			t.Errorf("why orphan:\n%s", out)
		}
		if out := ok(t, srv.Kubeconfig, "why", "credential/client", "-n", "shop"); !strings.Contains(out, "Credential/shop/client is Active") {
			t.Errorf("why on an Active object:\n%s", out)
		}
	})

	t.Run("wait succeeds on Active, fails fast on Stalled, times out on Pending", func(t *testing.T) {
		if out := ok(t, srv.Kubeconfig, "wait", "credential/client", "-n", "shop", "--for=active"); !strings.Contains(out, "condition met") {
			t.Errorf("wait client: %s", out)
		}
		r := ctl(t, srv.Kubeconfig, "wait", "credential/taken", "-n", "shop", "--for=active", "--timeout", "10m")
		if r.code != 1 || !strings.Contains(r.err, "will not become Active: Stalled: SecretConflict") {
			t.Errorf("wait taken: %s", r)
		}
		r = ctl(t, srv.Kubeconfig, "wait", "credential/consumer", "-n", "shop", "--for=active", "--timeout", "1s")
		if r.code != 1 || !strings.Contains(r.err, "timed out waiting for credentials.kubeos.dev/consumer to be Active: phase Pending (DependenciesNotActive") {
			t.Errorf("wait consumer: %s", r)
		}
		if r := ctl(t, srv.Kubeconfig, "wait", "credential/client", "-n", "shop", "--for=ready"); r.code != 1 || !strings.Contains(r.err, "only --for=active") {
			t.Errorf("wait --for=ready: %s", r)
		}
	})

	t.Run("audit queries by uid, user and operator", func(t *testing.T) {
		uid := k.ok(t, "", "get", "credential", "app", "-n", "shop", "-o", "jsonpath={.metadata.uid}")
		var l opsapi.AuditList
		if err := json.Unmarshal([]byte(ok(t, srv.Kubeconfig, "audit", "-n", "shop", "--uid", uid, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		var engine, status bool
		for _, ev := range l.Items {
			if ev.ObjectRef == nil || string(ev.ObjectRef.UID) != uid {
				t.Fatalf("entry about another object: %+v", ev.ObjectRef)
			}
			if ev.Annotations["lifecycle.kubeos.dev/operator"] == "system:kube-controller:lifecycle" {
				engine = true
			}
			if ev.ObjectRef.Subresource == "status" && ev.Annotations["lifecycle.kubeos.dev/phase"] == "Active" {
				status = true
			}
		}
		if !engine || !status {
			t.Errorf("audit --uid %s: engine's writes %v, status write leaving Active %v (%d entries)", uid, engine, status, len(l.Items))
		}
		out := ok(t, srv.Kubeconfig, "audit", "-n", "shop", "--operator", "system:kube-controller:lifecycle", "--phase", "Failed", "--since", "1h")
		if !strings.Contains(out, "credentials.kubeos.dev/status/shop/taken") && !strings.Contains(out, "credentials.kubeos.dev/shop/taken") {
			t.Errorf("audit --phase Failed lacks taken:\n%s", out)
		}
		if out := ok(t, srv.Kubeconfig, "audit", "-A", "--user", "nobody-at-all"); !strings.Contains(out, "no entries") {
			t.Errorf("audit --user nobody:\n%s", out)
		}
	})

	t.Run("a view-only user sees their namespace and is told what is hidden", func(t *testing.T) {
		// The viewer's kubeconfig names no namespace: default, where they may read nothing.
		r := ctl(t, viewer, "health", "-A")
		if r.code != 0 || !strings.Contains(r.out, "cluster-wide health is hidden") || !strings.Contains(r.out, "showing namespace default: hidden too") {
			t.Errorf("viewer health -A: %s", r)
		}
		r = ctl(t, viewer, "health", "-A", "-n", "shop")
		if r.code != 2 || !strings.Contains(r.out, "cluster-wide health is hidden") || !strings.Contains(r.out, "Credential") {
			t.Errorf("viewer health -A -n shop: %s", r)
		}
		assertRows(t, ok(t, viewer, "tree", "credential/client", "-n", "shop"), []string{"client", "└─app", "  └─web", "    └─root-ca"})
		if out := ok(t, viewer, "why", "credential/consumer", "-n", "shop"); !strings.Contains(out, "Blocker: Credential/shop/taken") {
			t.Errorf("viewer why:\n%s", out)
		}
		if r := ctl(t, viewer, "tree", "credential/secret-one", "-n", "elsewhere"); r.code != 1 || !strings.Contains(r.err, "Error from server (Forbidden)") {
			t.Errorf("viewer tree in another namespace: %s", r)
		}
		if r := ctl(t, viewer, "tree", "tenant/acme"); r.code != 1 || !strings.Contains(r.err, "Error from server (Forbidden)") {
			t.Errorf("viewer tree tenant: %s", r)
		}
		if out := ok(t, viewer, "audit", "-n", "shop", "--since", "1h"); !strings.Contains(out, "credentials.kubeos.dev") {
			t.Errorf("viewer audit in shop:\n%s", out)
		}
		if r := ctl(t, viewer, "audit", "-A"); r.code != 1 || !strings.Contains(r.err, "Error from server (Forbidden)") {
			t.Errorf("viewer audit -A: %s", r)
		}
		if r := ctl(t, viewer, "audit", "-n", "elsewhere"); r.code != 1 || !strings.Contains(r.err, "Error from server (Forbidden)") {
			t.Errorf("viewer audit in elsewhere: %s", r)
		}
	})

	t.Run("unknown kinds and objects are kubectl-style errors", func(t *testing.T) {
		for _, cmd := range []string{"tree", "why", "why-stuck", "wait"} {
			r := ctl(t, srv.Kubeconfig, cmd, "credential/nope", "-n", "shop")
			if r.code != 1 || strings.TrimSpace(r.err) != `Error from server (NotFound): credentials.kubeos.dev "nope" not found` {
				t.Errorf("%s credential/nope: %s", cmd, r)
			}
			r = ctl(t, srv.Kubeconfig, cmd, "widget/x")
			if r.code != 1 || strings.TrimSpace(r.err) != `error: the server doesn't have a resource type "widget"` {
				t.Errorf("%s widget/x: %s", cmd, r)
			}
		}
		if r := ctl(t, srv.Kubeconfig, "tree", "configmap/x"); r.code != 1 || !strings.Contains(r.err, "configmaps is not a lifecycle-managed kind") {
			t.Errorf("tree configmap/x: %s", r)
		}
	})

	t.Run("kubectl finds the plugin: kubectl kube tree", func(t *testing.T) {
		out, errOut, err := k.run(srv.Kubeconfig, "", "kube", "tree", "credential/client", "-n", "shop")
		if err != nil {
			t.Fatalf("kubectl kube tree: %v\n%s", err, errOut)
		}
		assertRows(t, out, []string{"client", "└─app", "  └─web", "    └─root-ca"})
		_, errOut, err = k.run(srv.Kubeconfig, "", "kube", "tree", "credential/nope", "-n", "shop")
		if err == nil || !strings.Contains(errOut, `Error from server (NotFound): credentials.kubeos.dev "nope" not found`) {
			t.Errorf("kubectl kube tree credential/nope: %v %s", err, errOut)
		}
	})

	t.Run("tree -w redraws when an object changes", func(t *testing.T) {
		cmd := exec.Command(kubeBin, "ctl", "--kubeconfig", srv.Kubeconfig, "tree", "certificate/web", "-n", "shop", "-D", "-w")
		home := t.TempDir()
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		var out servertest.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			if !strings.Contains(out.String(), "both") {
				return fmt.Errorf("first draw not there:\n%s", out.String())
			}
			return nil
		})
		if strings.Contains(out.String(), "late") {
			t.Fatalf("late before it exists:\n%s", out.String())
		}
		k.apply(t, "apiVersion: kubeos.dev/v1alpha1\nkind: Credential\nmetadata: {name: late, namespace: shop}\nspec: {type: password, dependsOn: [{kind: Certificate, name: web}]}\n")
		servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			if !strings.Contains(out.String(), "└─late") && !strings.Contains(out.String(), "├─late") {
				return fmt.Errorf("no redraw with late:\n%s", out.String())
			}
			return nil
		})
	})

	t.Run("why-stuck: a finalizer nobody removes, dependents that hold a deletion", func(t *testing.T) {
		k.ok(t, "", "delete", "credential", "held", "-n", "shop", "--wait=false")
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			out := ok(t, srv.Kubeconfig, "why-stuck", "credential/held", "-n", "shop")
			for _, want := range []string{"deletion requested", "example.com/hold: set by field manager kubectl-client-side-apply", "Dependents still there:\n  none",
				"Deletion timeout:", "Audit entries since deletion began (writes):", "delete"} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("why-stuck held lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "kubeos.dev/lifecycle:") {
				return fmt.Errorf("the engine's finalizer is still there:\n%s", out)
			}
			return nil
		})
		k.ok(t, "", "delete", "certificate", "root-ca", "-n", "shop", "--wait=false")
		servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			out := ok(t, srv.Kubeconfig, "why-stuck", "certificate/root-ca", "-n", "shop")
			for _, want := range []string{"kubeos.dev/lifecycle: the lifecycle engine", "Certificate/shop/web  Reconciling  DependenciesNotActive", "WaitingForDependents", "left (the kind's timeout is 10m0s"} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("why-stuck root-ca lacks %q:\n%s", want, out)
				}
			}
			return nil
		})
		out := ok(t, srv.Kubeconfig, "tree", "certificate/root-ca", "-n", "shop", "-D", "--depth", "1")
		if !strings.Contains(out, "Deleting") || !strings.Contains(out, "Finalizers: kubeos.dev/lifecycle") {
			t.Errorf("tree of a deleting object:\n%s", out)
		}
		if out := ok(t, srv.Kubeconfig, "why-stuck", "credential/client", "-n", "shop"); !strings.Contains(out, "is not being deleted") {
			t.Errorf("why-stuck on a live object:\n%s", out)
		}
	})
}

func lines(out string) []string { return strings.Split(strings.TrimRight(out, "\n"), "\n") }

// assertRows checks the NAME column of a tree, row by row (after the header).
func assertRows(t *testing.T, out string, names []string) {
	t.Helper()
	ls := lines(out)
	if len(ls) != len(names)+1 || !strings.HasPrefix(ls[0], "NAME") {
		t.Fatalf("want a header and %d rows:\n%s", len(names), out)
	}
	for i, want := range names {
		if !strings.HasPrefix(ls[i+1], want+" ") {
			t.Errorf("row %d: %q, want it to start with %q\n%s", i+1, ls[i+1], want, out)
		}
	}
}
