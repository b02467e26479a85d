package lifecycle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	corev1 "k8s.io/api/core/v1"
)

func cm(gen int64, rv string, mut func(*corev1.ConfigMap)) client.Object {
	o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x", Generation: gen, ResourceVersion: rv,
		Labels: map[string]string{"team": "blue"}}}
	if mut != nil {
		mut(o)
	}
	return o
}

func TestUpdateChange(t *testing.T) {
	now := metav1.NewTime(time.Unix(1, 0))
	cases := []struct {
		name string
		cur  client.Object
		want Change
		ok   bool
	}{
		{"status write only (resourceVersion moves)", cm(1, "2", nil), 0, false},
		{"spec change", cm(2, "2", nil), ChangeGeneration, true},
		{"label", cm(1, "2", func(o *corev1.ConfigMap) { o.Labels["team"] = "red" }), ChangeMetadata, true},
		{"finalizer", cm(1, "2", func(o *corev1.ConfigMap) { o.Finalizers = []string{Finalizer} }), ChangeMetadata, true},
		{"deletion", cm(1, "2", func(o *corev1.ConfigMap) { o.DeletionTimestamp = &now }), ChangeMetadata, true},
	}
	for _, c := range cases {
		got, ok := UpdateChange(cm(1, "1", nil), c.cur)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestFilter(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"team": "blue"})
	cases := []struct {
		name string
		f    Filter
		c    Change
		obj  client.Object
		want bool
	}{
		{"zero filter takes all", Filter{}, ChangeCreate, cm(1, "1", nil), true},
		{"label selector match", Filter{LabelSelector: sel}, ChangeCreate, cm(1, "1", nil), true},
		{"label selector miss", Filter{LabelSelector: sel}, ChangeCreate, cm(1, "1", func(o *corev1.ConfigMap) { o.Labels = nil }), false},
		{"namespace miss", Filter{Namespaces: []string{"b"}}, ChangeCreate, cm(1, "1", nil), false},
		{"change type off", Filter{Changes: ChangeGeneration}, ChangeMetadata, cm(1, "1", nil), false},
		{"change type on", Filter{Changes: ChangeGeneration | ChangeDelete}, ChangeDelete, cm(1, "1", nil), true},
	}
	for _, c := range cases {
		if got := c.f.Accepts(c.c, c.obj); got != c.want {
			t.Errorf("%s: got %v", c.name, got)
		}
	}
	// The predicate never lets an object's own status write through.
	if (Filter{}).Predicate().Update(event.UpdateEvent{ObjectOld: cm(1, "1", nil), ObjectNew: cm(1, "2", nil)}) {
		t.Error("status-only update passed the predicate")
	}
}

func TestEventType(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"Credential", "Rotated"}:          "credential_rotated",
		{"AccessPolicy", "Deprovisioned"}:  "access_policy_deprovisioned",
		{"Tenant", "NamespacesDeleted"}:    "tenant_namespaces_deleted",
		{"Certificate", "ReconcileFailed"}: "certificate_reconcile_failed",
		{"X509Issuer", "DependencyCycle"}:  "x509_issuer_dependency_cycle",
	} {
		if got := EventType(in[0], in[1]); got != want {
			t.Errorf("EventType(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
}

func TestOwnFinalizerEcho(t *testing.T) {
	now := metav1.NewTime(time.Unix(1, 0))
	withFin := func(more func(*corev1.ConfigMap)) client.Object {
		return cm(1, "2", func(o *corev1.ConfigMap) {
			o.Finalizers = append(o.Finalizers, Finalizer)
			if more != nil {
				more(o)
			}
		})
	}
	cases := []struct {
		name     string
		old, cur client.Object
		pass     bool
	}{
		{"the engine's finalizer added, nothing else", cm(1, "1", nil), withFin(nil), false},
		{"beside another finalizer", cm(1, "1", func(o *corev1.ConfigMap) { o.Finalizers = []string{"x"} }),
			cm(1, "2", func(o *corev1.ConfigMap) { o.Finalizers = []string{"x", Finalizer} }), false},
		{"and a label", cm(1, "1", nil), withFin(func(o *corev1.ConfigMap) { o.Labels["team"] = "red" }), true},
		{"and an annotation", cm(1, "1", nil), withFin(func(o *corev1.ConfigMap) { o.Annotations = map[string]string{"a": "b"} }), true},
		{"and the spec", cm(1, "1", nil), cm(2, "2", func(o *corev1.ConfigMap) { o.Finalizers = []string{Finalizer} }), true},
		{"and another finalizer", cm(1, "1", nil), withFin(func(o *corev1.ConfigMap) { o.Finalizers = append(o.Finalizers, "x") }), true},
		{"and a deletion", cm(1, "1", nil), withFin(func(o *corev1.ConfigMap) { o.DeletionTimestamp = &now }), true},
		{"and an owner", cm(1, "1", nil), withFin(func(o *corev1.ConfigMap) { o.OwnerReferences = []metav1.OwnerReference{{UID: "u", Name: "o"}} }), true},
		{"the finalizer removed", withFin(nil), cm(1, "3", nil), true},
		{"another finalizer added", cm(1, "1", nil), cm(1, "2", func(o *corev1.ConfigMap) { o.Finalizers = []string{"x"} }), true},
	}
	p := ownFinalizerEcho()
	for _, c := range cases {
		if got := p.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.cur}); got != c.pass {
			t.Errorf("%s: passes %v, want %v", c.name, got, c.pass)
		}
	}
	if !p.Create(event.CreateEvent{Object: withFin(nil)}) || !p.Delete(event.DeleteEvent{Object: withFin(nil)}) {
		t.Error("creates and deletes must pass")
	}
}
