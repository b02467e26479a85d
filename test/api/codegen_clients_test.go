package api

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	kubeosac "kubeos.dev/kube/pkg/client/applyconfiguration/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/client/clientset/versioned"
	"kubeos.dev/kube/pkg/client/informers/externalversions"
	"kubeos.dev/kube/pkg/lifecycle"
)

// TestTypedTenant: a cluster-scoped kind through the clientset — create, get, list by label,
// a watch that sees the engine take it to Active, server-side apply of a spec change, the
// /status subresource (an illegal phase write refused by the CRD's transition rule), and
// delete.
func TestTypedTenant(t *testing.T) {
	codegenSuite.Need(t)
	kc, core := codegenClients(t)
	ctx := ctxT(t, 2*time.Minute)
	tenants := kc.KubeosV1alpha1().Tenants()

	created, err := tenants.Create(ctx, &v1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: "typed", Labels: map[string]string{"suite": "codegen"}},
		Spec:       v1alpha1.TenantSpec{Environments: []string{"dev"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tenants.Get(ctx, "typed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || !slices.Equal(got.Spec.Environments, []string{"dev"}) {
		t.Fatalf("get: %+v, want the created tenant", got)
	}
	list, err := tenants.List(ctx, metav1.ListOptions{LabelSelector: "suite=codegen"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "typed" {
		t.Fatalf("list suite=codegen: %d items, want the one tenant", len(list.Items))
	}

	// Watch from the creation: the engine reconciles it to Active with its namespace.
	active := waitWatch(t, ctx, func(ctx context.Context) (watch.Interface, error) {
		return tenants.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=typed", ResourceVersion: created.ResourceVersion})
	}, func(o *v1alpha1.Tenant) bool { return o.Status.Phase == lifecycle.PhaseActive })
	if !slices.Contains(active.Status.Namespaces, "typed-dev") {
		t.Fatalf("active tenant: namespaces %v, want typed-dev", active.Status.Namespaces)
	}
	if _, err := core.CoreV1().Namespaces().Get(ctx, "typed-dev", metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace typed-dev: %v", err)
	}

	// Server-side apply of the spec (a second environment) through the apply configuration.
	applied, err := tenants.Apply(ctx, kubeosac.Tenant("typed").WithSpec(kubeosac.TenantSpec().WithEnvironments("dev", "prod")),
		metav1.ApplyOptions{FieldManager: "codegen-test", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied.Spec.Environments, []string{"dev", "prod"}) || applied.Generation != active.Generation+1 {
		t.Fatalf("apply: environments %v generation %d, want [dev prod] at %d", applied.Spec.Environments, applied.Generation, active.Generation+1)
	}
	servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		_, err := core.CoreV1().Namespaces().Get(ctx, "typed-prod", metav1.GetOptions{})
		return err
	})

	// UpdateStatus writes /status, where the CRD's transition rule refuses Active → Pending.
	servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		cur, err := tenants.Get(ctx, "typed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Status.Phase != lifecycle.PhaseActive {
			return fmt.Errorf("phase %s, want Active", cur.Status.Phase)
		}
		cur.Status.Phase = lifecycle.PhasePending
		_, err = tenants.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return err // the engine wrote in between: read again
		}
		if !apierrors.IsInvalid(err) {
			t.Fatalf("UpdateStatus Active → Pending: %v, want 422 Invalid", err)
		}
		return nil
	})

	if err := tenants.Delete(ctx, "typed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		_, err := tenants.Get(ctx, "typed", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("tenant still there (%v)", err)
	})
}

// TestTypedCredentialInformer: a namespaced kind created by server-side apply and followed
// through the generated shared informer factory and lister until the engine makes it Active;
// ApplyStatus adds a condition of another field manager next to the engine's.
func TestTypedCredentialInformer(t *testing.T) {
	codegenSuite.Need(t)
	kc, core := codegenClients(t)
	ctx := ctxT(t, 2*time.Minute)
	if _, err := kc.KubeosV1alpha1().Tenants().Create(ctx, &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "inf"},
		Spec: v1alpha1.TenantSpec{Environments: []string{"dev"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.KubeosV1alpha1().Tenants().Delete(context.Background(), "inf", metav1.DeleteOptions{})
	})
	servertest.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		_, err := core.CoreV1().Namespaces().Get(ctx, "inf-dev", metav1.GetOptions{})
		return err
	})

	factory := externalversions.NewSharedInformerFactoryWithOptions(kc, 0, externalversions.WithNamespace("inf-dev"))
	creds := factory.Kubeos().V1alpha1().Credentials()
	seen := make(chan string, 1024)
	if _, err := creds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { seen <- "add " + string(o.(*v1alpha1.Credential).Status.Phase) },
		UpdateFunc: func(_, o any) { seen <- "update " + string(o.(*v1alpha1.Credential).Status.Phase) },
	}); err != nil {
		t.Fatal(err)
	}
	lister := creds.Lister()
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() }) // Shutdown waits for the informers to stop
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}

	cr, err := kc.KubeosV1alpha1().Credentials("inf-dev").Apply(ctx,
		kubeosac.Credential("db-password", "inf-dev").WithLabels(map[string]string{"app": "db"}).
			WithSpec(kubeosac.CredentialSpec().WithType(v1alpha1.CredentialPassword).WithLength(24)),
		metav1.ApplyOptions{FieldManager: "codegen-test"})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Spec.Length != 24 || cr.Spec.Type != v1alpha1.CredentialPassword {
		t.Fatalf("applied credential spec %+v", cr.Spec)
	}

	var last *v1alpha1.Credential
	servertest.Eventually(t, time.Minute, 50*time.Millisecond, func() error {
		got, err := lister.Credentials("inf-dev").Get("db-password")
		if err != nil {
			return err
		}
		if got.Status.Phase != lifecycle.PhaseActive {
			return fmt.Errorf("lister: phase %q", got.Status.Phase)
		}
		last = got
		return nil
	})
	if last.Status.SecretName != "db-password" || last.Status.LastRotated == nil {
		t.Fatalf("active credential status %+v, want secret db-password and a rotation time", last.Status)
	}
	sec, err := core.CoreV1().Secrets("inf-dev").Get(ctx, "db-password", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sec.Data["password"]); n != 24 {
		t.Fatalf("secret password length %d, want 24", n)
	}
	sel, err := lister.List(labels.SelectorFromSet(labels.Set{"app": "db"}))
	if err != nil || len(sel) != 1 {
		t.Fatalf("lister.List app=db: %d items, %v", len(sel), err)
	}
	if _, err := lister.Credentials("inf-dev").Get("missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("lister get missing: %v, want NotFound", err)
	} else if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Details.Group != v1alpha1.Group ||
		se.Status().Details.Kind != "credential" {
		t.Fatalf("lister NotFound details %+v, want group kubeos.dev resource credential", err)
	}
	// The handler sees the add and the engine's status updates, reaching Active (handlers run
	// after the store is updated, so the lister may see Active first).
	var events []string
	servertest.Eventually(t, 30*time.Second, 10*time.Millisecond, func() error {
		for len(seen) > 0 {
			events = append(events, <-seen)
		}
		if !slices.Contains(events, "update Active") {
			return fmt.Errorf("informer events %v, no update to Active yet", events)
		}
		return nil
	})
	if events[0] != "add " && events[0] != "add Pending" {
		t.Fatalf("informer events %v, want the add of the new credential first", events)
	}

	// ApplyStatus by another field manager: its condition sits beside the engine's.
	withCond, err := kc.KubeosV1alpha1().Credentials("inf-dev").ApplyStatus(ctx,
		kubeosac.Credential("db-password", "inf-dev").WithStatus(kubeosac.CredentialStatus().WithConditions(
			metav1ac.Condition().WithType("Audited").WithStatus(metav1.ConditionTrue).WithReason("Reviewed").
				WithMessage("checked by the codegen test").WithLastTransitionTime(metav1.Now()))),
		metav1.ApplyOptions{FieldManager: "auditor", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, c := range withCond.Status.Conditions {
		types = append(types, c.Type)
	}
	if !slices.Contains(types, "Audited") || !slices.Contains(types, lifecycle.ConditionReady) || withCond.Status.Phase != lifecycle.PhaseActive {
		t.Fatalf("after ApplyStatus: conditions %v phase %s, want Audited beside Ready, still Active", types, withCond.Status.Phase)
	}
}

// waitWatch reads a watch until cond holds for an object (restarting a closed watch).
func waitWatch[O any, P interface {
	*O
	metav1.Object
}](t *testing.T, ctx context.Context, open func(context.Context) (watch.Interface, error), cond func(P) bool) P {
	t.Helper()
	for {
		w, err := open(ctx)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			if o, ok := ev.Object.(P); ok && cond(o) {
				w.Stop()
				return o
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			t.Fatalf("watch: condition not met: %v", ctx.Err())
		}
	}
}

var _ versioned.Interface = (*versioned.Clientset)(nil)
