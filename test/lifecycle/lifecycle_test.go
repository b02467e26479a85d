package lifecycle

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/cli"
	"kubeos.dev/kube/internal/server"
)

// TestLifecycle is the "Done when", in order: each step builds on the last.
func TestLifecycle(t *testing.T) {
	lifecycleSuite.Need(t)
	k := newKubectl(t)

	t.Run("tenant with three environments", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec:
  environments: [dev, staging, prod]
  admins: [{kind: User, name: alice}]
`)
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "tenant", "acme")
		for _, env := range []string{"dev", "staging", "prod"} {
			ns := "acme-" + env
			k.waitFor(t, 10*time.Second, "{.metadata.labels.kubeos\\.dev/tenant}/{.metadata.labels.kubeos\\.dev/env}", "acme/"+env, "namespace", ns)
			k.waitFor(t, 10*time.Second, "{.roleRef.name}/{.subjects[0].name}", "admin/alice", "rolebinding", "kubeos-tenant-admins", "-n", ns)
		}
		out := k.ok(t, "get", "tenants")
		if !strings.Contains(out, "PHASE") || !strings.Contains(out, "Active") {
			t.Fatalf("printer columns: %s", out)
		}
	})

	t.Run("audit events carry the acting operator and the lifecycle phase", func(t *testing.T) {
		// The engine's status write that made the Tenant Active is audited with the engine as
		// the operator and the phase the write left; the user's create with the user.
		engine := server.ControllerUser("lifecycle")
		var sawEngine, sawUser bool
		deadline := time.Now().Add(10 * time.Second)
		for !(sawEngine && sawUser) && time.Now().Before(deadline) {
			data, err := os.ReadFile(auditLog)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var ev auditv1.Event
				if json.Unmarshal([]byte(line), &ev) != nil || ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil ||
					ev.ObjectRef.Resource != "tenants" || ev.ObjectRef.Name != "acme" {
					continue
				}
				op, phase := ev.Annotations[server.AuditOperatorAnnotation], ev.Annotations[server.AuditPhaseAnnotation]
				if op == engine && ev.ObjectRef.Subresource == "status" && phase == "Active" {
					if ev.ObjectRef.UID == "" {
						t.Fatalf("audit event of a status write without the object's UID: %s", line)
					}
					sawEngine = true
				}
				if op == "kube-admin" && ev.Verb != "" {
					sawUser = true
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !sawEngine || !sawUser {
			t.Fatalf("audit log lacks the engine's Active status write (%v) or the admin's request (%v) with operator/phase annotations", sawEngine, sawUser)
		}
	})

	t.Run("a reconcile's trace id is on the bus and in the audit log of its writes", func(t *testing.T) {
		// The engine's status write that moved the Tenant to a new phase is audited with the
		// trace id of the phase_changed event the same reconcile published.
		eventually(t, 10*time.Second, func() error {
			traces := map[string]bool{}
			for _, e := range busEvents(t) {
				if e["event_type"] == "phase_changed" && e["kind"] == "Tenant" && e["name"] == "acme" {
					traces[fmt.Sprint(e["trace_id"])] = true
				}
			}
			if len(traces) == 0 {
				return fmt.Errorf("no phase_changed event for Tenant acme on the bus")
			}
			data, err := os.ReadFile(auditLog)
			if err != nil {
				return err
			}
			var seen []string
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var ev auditv1.Event
				if json.Unmarshal([]byte(line), &ev) != nil || ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil ||
					ev.ObjectRef.Resource != "tenants" || ev.ObjectRef.Name != "acme" || ev.ObjectRef.Subresource != "status" {
					continue
				}
				id := ev.Annotations[filters.TraceIDAnnotation]
				if traces[id] {
					return nil
				}
				seen = append(seen, id)
			}
			return fmt.Errorf("no audited status write of Tenant acme carries a phase_changed trace id %v (status writes carry %q)", traces, seen)
		})
	})

	t.Run("invalid environment name is 422", func(t *testing.T) {
		k.fails(t, srv.Kubeconfig, `apiVersion: kubeos.dev/v1alpha1
kind: Tenant
metadata: {name: bad}
spec: {environments: [Prod_1]}
`, `is invalid`, "apply", "-f", "-")
	})

	t.Run("quota refuses past its limit", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Quota
metadata: {name: acme-quota}
spec: {tenant: acme, limits: [{resource: configmaps, namespace: acme-dev, max: 3}]}
`)
		// Every namespace holds kube-root-ca.crt, which counts as any configmap (as upstream's
		// ResourceQuota counts it): 3 leave room for two of the test's.
		k.waitFor(t, 30*time.Second, "{.metadata.name}", "kube-root-ca.crt", "configmap", "kube-root-ca.crt", "-n", "acme-dev")
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "quota", "acme-quota")
		k.ok(t, "create", "configmap", "one", "-n", "acme-dev")
		k.ok(t, "create", "configmap", "two", "-n", "acme-dev")
		k.fails(t, srv.Kubeconfig, "", "exceeded quota: Quota acme-quota limits configmaps to 3 in namespace acme-dev",
			"create", "configmap", "three", "-n", "acme-dev")
		k.ok(t, "create", "configmap", "three", "-n", "acme-staging")
		k.waitFor(t, 30*time.Second, "{.status.usage[0].used}", "3", "quota", "acme-quota")
	})

	t.Run("access policy refuses prod and allows staging", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: AccessPolicy
metadata: {name: alice-nonprod}
spec: {tenant: acme, subjects: [{kind: User, name: alice}], allowedEnvs: [dev, staging]}
`)
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "accesspolicy", "alice-nonprod")
		alice := filepath.Join(t.TempDir(), "alice.kubeconfig")
		kube(t, "certs", "user", "alice", "--data-dir", srv.DataDir, "-o", alice)
		eventually(t, 10*time.Second, func() error {
			_, errOut, err := k.run(t, alice, "", "get", "configmaps", "-n", "acme-staging")
			if err != nil {
				return fmt.Errorf("alice in staging: %s", errOut)
			}
			return nil
		})
		k.fails(t, alice, "", `AccessPolicy alice-nonprod allows alice only in environments [dev, staging] of tenant acme; namespace acme-prod is environment "prod"`,
			"get", "configmaps", "-n", "acme-prod")
		k.fails(t, alice, "", "is forbidden", "create", "configmap", "x", "-n", "acme-prod")
	})

	t.Run("access policy via admits one user agent and refuses another", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: AccessPolicy
metadata: {name: bob-deploy}
spec: {tenant: acme, subjects: [{kind: User, name: bob}], allowedEnvs: [staging], via: [kube-deploy]}
`)
		defer k.ok(t, "delete", "accesspolicy", "bob-deploy") // the Tenant's teardown below waits for its dependents
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "accesspolicy", "bob-deploy")
		k.ok(t, "create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob", "-n", "acme-staging")
		bob := filepath.Join(t.TempDir(), "bob.kubeconfig")
		kube(t, "certs", "user", "bob", "--data-dir", srv.DataDir, "-o", bob)
		list := func(agent string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", bob)
			if err != nil {
				t.Fatal(err)
			}
			cfg.UserAgent = agent
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = cs.CoreV1().ConfigMaps("acme-staging").List(ctx, metav1.ListOptions{})
			return err
		}
		eventually(t, 10*time.Second, func() error { return list("kube-deploy/1.0 (linux/amd64)") })
		err := list("curl/8.5.0")
		if !apierrors.IsForbidden(err) {
			t.Fatalf("bob listing with another user agent: %v, want 403", err)
		}
		if want := `AccessPolicy bob-deploy allows bob in tenant acme only via [kube-deploy]; this request came with user agent "curl/8.5.0"`; !strings.Contains(err.Error(), want) {
			t.Fatalf("403 %q does not give the reason %q", err, want)
		}
	})

	t.Run("secret policy whitelists the secrets custom resources and platform kinds reference", func(t *testing.T) {
		k.ok(t, "create", "namespace", "secrets-demo")
		k.apply(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.demo.example.com}
spec:
  group: demo.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
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
              secretRef: {type: object, properties: {name: {type: string}}}
---
apiVersion: kubeos.dev/v1alpha1
kind: SecretPolicy
metadata: {name: app-secrets, namespace: secrets-demo}
spec:
  rules: [{secretNames: ["app-*"], kinds: [Widget]}]
`)
		widget := func(name, secret string) string {
			return fmt.Sprintf("apiVersion: demo.example.com/v1\nkind: Widget\nmetadata: {name: %s, namespace: secrets-demo}\nspec: {secretRef: {name: %s}}\n", name, secret)
		}
		// Refused once the policy is in the admission plugin's cache (and the CRD served).
		eventually(t, 30*time.Second, func() error {
			_, errOut, err := k.run(t, srv.Kubeconfig, widget("bad", "db-root"), "create", "-f", "-")
			if err == nil {
				k.ok(t, "delete", "widget", "bad", "-n", "secrets-demo")
				return fmt.Errorf("widget referencing db-root admitted")
			}
			if want := `secret "db-root" may not be referenced by a Widget in namespace secrets-demo: no rule of SecretPolicy app-secrets allows it`; !strings.Contains(errOut, want) || !strings.Contains(errOut, "is forbidden") {
				return fmt.Errorf("error %q, want a 403 with %q", errOut, want)
			}
			return nil
		})
		k.apply(t, widget("good", "app-db"))
		if got := k.jsonpath(t, "{.spec.secretRef.name}", "widget", "good", "-n", "secrets-demo"); got != "app-db" {
			t.Fatalf("allowed widget: secretRef %q", got)
		}
		// A platform kind's reference is checked by its kind: no rule lets a Certificate use it.
		k.fails(t, srv.Kubeconfig, `apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: web, namespace: secrets-demo}
spec: {dnsNames: [web.example.com], secretName: app-web}
`, `secret "app-web" may not be referenced by a Certificate in namespace secrets-demo: no rule of SecretPolicy app-secrets allows it`, "create", "-f", "-")
	})

	t.Run("credential rotates", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: db, namespace: default}
spec: {type: password, length: 24, rotationPeriod: 2s}
`)
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "credential", "db", "-n", "default")
		first := k.jsonpath(t, "{.data.password}", "secret", "db", "-n", "default")
		if pw, _ := base64.StdEncoding.DecodeString(first); len(pw) != 24 {
			t.Fatalf("password %q: want 24 characters", pw)
		}
		eventually(t, 20*time.Second, func() error {
			n, _ := strconv.Atoi(k.jsonpath(t, "{.status.rotations}", "credential", "db", "-n", "default"))
			if n < 2 {
				return fmt.Errorf("%d rotations", n)
			}
			if k.jsonpath(t, "{.data.password}", "secret", "db", "-n", "default") == first {
				return fmt.Errorf("password unchanged")
			}
			return nil
		})
		if k.jsonpath(t, "{.status.lastRotated}", "credential", "db", "-n", "default") == "" {
			t.Fatal("status.lastRotated not recorded")
		}
	})

	t.Run("certificate issued, verified against the CA, renewed", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: web, namespace: default}
spec: {dnsNames: [web.example.com], duration: 30s, renewBefore: 27s}
`)
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "certificate", "web", "-n", "default")
		if typ := k.jsonpath(t, "{.type}", "secret", "web", "-n", "default"); typ != "kubernetes.io/tls" {
			t.Fatalf("secret type %q", typ)
		}
		cert := func() *x509.Certificate {
			raw, _ := base64.StdEncoding.DecodeString(k.jsonpath(t, "{.data.tls\\.crt}", "secret", "web", "-n", "default"))
			block, _ := pem.Decode(raw)
			if block == nil {
				t.Fatal("tls.crt is not PEM")
			}
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		caPEM, err := os.ReadFile(filepath.Join(srv.DataDir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		c1 := cert()
		if _, err := c1.Verify(x509.VerifyOptions{Roots: pool, DNSName: "web.example.com"}); err != nil {
			t.Fatalf("certificate does not verify against the Kube CA: %v", err)
		}
		if na := k.jsonpath(t, "{.status.notAfter}", "certificate", "web", "-n", "default"); na == "" {
			t.Fatal("status.notAfter empty")
		}
		eventually(t, 20*time.Second, func() error {
			if c := cert(); c.SerialNumber.Cmp(c1.SerialNumber) == 0 {
				return fmt.Errorf("not renewed yet")
			}
			return nil
		})
		if _, err := cert().Verify(x509.VerifyOptions{Roots: pool, DNSName: "web.example.com"}); err != nil {
			t.Fatalf("renewed certificate does not verify: %v", err)
		}
	})

	t.Run("a deletion past its timeout is Stalled, with an Event and a metric", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: stall-ca, namespace: default}
spec: {isCA: true, commonName: stall-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: stall-leaf, namespace: default}
spec: {dnsNames: [leaf.example.com], issuer: stall-ca}
`)
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "certificate", "stall-leaf", "-n", "default")
		metric := `kube_lifecycle_deletion_stalled_total{kind="Certificate"}`
		before := sumMetric(scrape(t), metric)
		// The issuer's deletion waits for the leaf it issued, past the deletion timeout.
		k.ok(t, "delete", "certificate", "stall-ca", "-n", "default", "--wait=false")
		stalled := `{.status.conditions[?(@.type=="Stalled")]}`
		k.waitFor(t, 10*certificateDeletionTimeout, `{.status.conditions[?(@.type=="Stalled")].status}/{.status.conditions[?(@.type=="Stalled")].reason}`,
			"True/DeletionTimeout", "certificate", "stall-ca", "-n", "default")
		if msg := k.jsonpath(t, stalled+".message", "certificate", "stall-ca", "-n", "default"); !strings.Contains(msg, "deletion has not finished") ||
			!strings.Contains(msg, "Certificate/default/stall-leaf") {
			t.Fatalf("Stalled message %q: want the timeout and what blocks the deletion", msg)
		}
		eventually(t, 10*time.Second, func() error {
			out := k.ok(t, "get", "events.events.k8s.io", "-n", "default", "-o",
				`jsonpath={range .items[*]}{.regarding.kind}/{.regarding.name}/{.type}/{.reason}{"\n"}{end}`)
			if !strings.Contains(out, "Certificate/stall-ca/Warning/DeletionStalled") {
				return fmt.Errorf("no DeletionStalled Event for stall-ca in\n%s", out)
			}
			return nil
		})
		eventually(t, 10*time.Second, func() error {
			if got := sumMetric(scrape(t), metric); got < before+1 {
				return fmt.Errorf("%s = %v, want at least %v", metric, got, before+1)
			}
			return nil
		})
		// Once its dependent is gone, the stalled deletion finishes.
		k.ok(t, "delete", "certificate", "stall-leaf", "-n", "default")
		eventually(t, 30*time.Second, func() error {
			if _, _, err := k.run(t, srv.Kubeconfig, "", "get", "certificate", "stall-ca", "-n", "default"); err == nil {
				return fmt.Errorf("stall-ca still there")
			}
			return nil
		})
	})

	t.Run("a cycle between two objects is refused", func(t *testing.T) {
		k.apply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: ca-a, namespace: default}
spec: {isCA: true, commonName: ca-a}
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: ca-b, namespace: default}
spec: {isCA: true, commonName: ca-b, issuer: ca-a}
`)
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Active", "certificate", "ca-b", "-n", "default")
		k.fails(t, srv.Kubeconfig, "", "dependency cycle: Certificate/default/ca-a → Certificate/default/ca-b → Certificate/default/ca-a",
			"patch", "certificate", "ca-a", "-n", "default", "--type=merge", "-p", `{"spec":{"issuer":"ca-b"}}`)
	})

	t.Run("illegal phase write is 422 naming the transition", func(t *testing.T) {
		k.fails(t, srv.Kubeconfig, "", "illegal phase transition: Active → Pending",
			"patch", "tenant", "acme", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Pending"}}`)
		_, errOut, _ := k.run(t, srv.Kubeconfig, "", "patch", "tenant", "acme", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Pending"}}`)
		if !strings.Contains(errOut, "is invalid") {
			t.Fatalf("want a 422 Invalid: %s", errOut)
		}
	})

	t.Run("deleting the tenant tears down in reverse dependency order", func(t *testing.T) {
		k.ok(t, "delete", "tenant", "acme", "--wait=false")
		k.waitFor(t, 30*time.Second, "{.status.phase}", "Deleting", "tenant", "acme")
		eventually(t, 10*time.Second, func() error {
			msg := k.jsonpath(t, `{.status.conditions[?(@.type=="Terminating")].message}`, "tenant", "acme")
			if !strings.Contains(msg, "AccessPolicy/alice-nonprod") || !strings.Contains(msg, "Quota/acme-quota") {
				return fmt.Errorf("terminating message %q", msg)
			}
			return nil
		})
		k.ok(t, "get", "namespace", "acme-prod") // still there while dependents exist
		k.ok(t, "delete", "quota", "acme-quota")
		k.ok(t, "delete", "accesspolicy", "alice-nonprod")
		eventually(t, 60*time.Second, func() error {
			if _, _, err := k.run(t, srv.Kubeconfig, "", "get", "tenant", "acme"); err == nil {
				return fmt.Errorf("tenant still there")
			}
			if out := k.ok(t, "get", "namespaces", "-l", "kubeos.dev/tenant=acme", "-o", "name"); out != "" {
				return fmt.Errorf("namespaces left: %s", out)
			}
			return nil
		})
		events := busEvents(t)
		order := func(typ, name string) int {
			for i, e := range events {
				if e["event_type"] == typ && e["name"] == name {
					return i
				}
			}
			t.Fatalf("no %s event for %s on the bus", typ, name)
			return -1
		}
		tenant := order("tenant_namespaces_deleted", "acme")
		if q, a := order("quota_deprovisioned", "acme-quota"), order("access_policy_deprovisioned", "alice-nonprod"); q > tenant || a > tenant {
			t.Fatalf("teardown order: quota %d, access policy %d, tenant %d", q, a, tenant)
		}
	})

	t.Run("every transition is on the bus over Redis and counted in the metrics", func(t *testing.T) {
		metrics := scrape(t)
		for _, name := range []string{"kube_lifecycle_phase{", "kube_lifecycle_transitions_total{", "kube_lifecycle_illegal_transitions_total{",
			"kube_lifecycle_reconcile_seconds_bucket{", "kube_lifecycle_finalizer_age_seconds{", "eventbus_events_total{",
			"eventbus_processing_seconds", "eventbus_queue_length{"} {
			if !strings.Contains(metrics, name) {
				t.Errorf("/metrics lacks %s", name)
			}
		}
		eventually(t, 10*time.Second, func() error {
			want := sumMetric(scrape(t), "kube_lifecycle_transitions_total{")
			got := 0
			for _, e := range busEvents(t) {
				if e["event_type"] == "phase_changed" {
					if e["trace_id"] == "" || e["from"] == e["to"] {
						return fmt.Errorf("bad transition event %v", e)
					}
					got++
				}
			}
			if want == 0 || float64(got) != want {
				return fmt.Errorf("%d phase_changed events in Redis, %v transitions counted", got, want)
			}
			return nil
		})
	})
}

// kube runs the kube command line in-process.
func kube(t *testing.T, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := cli.NewCommand(&stdout, &stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("kube %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
}

// busEvents reads the lifecycle stream straight from Redis.
func busEvents(t *testing.T) []map[string]any {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rc.Close()
	msgs, err := rc.XRange(context.Background(), "kube:events:lifecycle", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		out[i] = m.Values
	}
	return out
}

// scrape reads /metrics as the admin.
func scrape(t *testing.T) string {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := restTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func sumMetric(text, prefix string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}
