package lifecycle

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestOwnedObjectDeleted: the driver reads what a Component owns from an informer cache;
// a Service deleted by hand (the cache's last event of it is its deletion) is created
// again, and a Deployment scaled by hand is put back.
func TestOwnedObjectDeleted(t *testing.T) {
	componentSuite.Need(t)
	dumpOnFailure(t, componentAdmin, acmeNS, &componentLog)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: owned}
spec:
  image: busybox:1.36
  command: [httpd, -f]
  exposes: [{name: http, port: 8080}]
`)
	waitComponent(t, "owned", 90*time.Second, "Active", componentActive)
	var svc corev1.Service
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "owned"}, &svc); err != nil {
		t.Fatal(err)
	}
	if err := componentAdmin.Delete(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		var again corev1.Service
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "owned"}, &again); err != nil {
			return err
		}
		if again.UID == svc.UID {
			return fmt.Errorf("the Service is the deleted one (%s)", svc.UID)
		}
		return nil
	})
	d := &appsv1.Deployment{}
	d.Namespace, d.Name = acmeNS, "owned"
	if err := componentAdmin.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "owned"}, d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			return fmt.Errorf("replicas %v", d.Spec.Replicas)
		}
		return nil
	})
	waitComponent(t, "owned", 90*time.Second, "Active with 1 replica", func(c *v1alpha1.Component) bool { return componentActive(c) && c.Status.Replicas == 1 })
}

// TestApplicationSettings: a change of the Application's spec (its environment) reaches
// its Components' pods; the Application's own status writes do not roll them.
func TestApplicationSettings(t *testing.T) {
	componentSuite.Need(t)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: settings}
spec:
  image: busybox:1.36
  command: [httpd, -f]
---
apiVersion: kubeos.dev/v1alpha1
kind: Application
metadata: {name: settings-app}
spec:
  components: [settings]
  environment: dev
`)
	envOf := func(d *appsv1.Deployment) string {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "KUBEOS_ENVIRONMENT" {
				return e.Value
			}
		}
		return ""
	}
	var d appsv1.Deployment
	servertest.Eventually(t, 90*time.Second, 200*time.Millisecond, func() error {
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "settings"}, &d); err != nil {
			return err
		}
		if got := envOf(&d); got != "dev" || d.Spec.Template.Labels["app.kubernetes.io/part-of"] != "settings-app" {
			return fmt.Errorf("KUBEOS_ENVIRONMENT %q, pod labels %v", got, d.Spec.Template.Labels)
		}
		return nil
	})
	waitComponent(t, "settings", 90*time.Second, "Active", componentActive)
	if _, errOut, err := alice(t, "", "-n", acmeNS, "patch", "application", "settings-app", "--type=merge", "-p", `{"spec":{"environment":"staging"}}`); err != nil {
		t.Fatalf("patch: %v %s", err, errOut)
	}
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "settings"}, &d); err != nil {
			return err
		}
		if got := envOf(&d); got != "staging" {
			return fmt.Errorf("KUBEOS_ENVIRONMENT %q", got)
		}
		return nil
	})
	waitComponent(t, "settings", 90*time.Second, "Active", componentActive)
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "settings"}, &d); err != nil {
		t.Fatal(err)
	}
	gen := d.Generation
	// The Application's status settles (its table); the Deployment's spec does not move.
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		var app v1alpha1.Application
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "settings-app"}, &app); err != nil {
			return err
		}
		if app.Status.Phase != "Active" {
			return fmt.Errorf("Application phase %q", app.Status.Phase)
		}
		return nil
	})
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "settings"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen {
		t.Errorf("Deployment generation %d → %d while only the Application's status moved", gen, d.Generation)
	}
}
