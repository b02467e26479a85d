package api

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// TestEventsOneStorage: events.k8s.io/v1 and core/v1 Events are one resource stored once, as
// in kube-apiserver — an Event a scheduler records through events.k8s.io is what
// `kubectl describe` (core/v1, by involvedObject field selector) shows, and a core/v1 Event
// is served by events.k8s.io with its fields renamed.
func TestEventsOneStorage(t *testing.T) {
	apiSuite.Need(t)
	cs := kubernetes.NewForConfigOrDie(adminConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := "events-shared"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	now := metav1.NowMicro()
	created, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "p1.sched"},
		EventTime:  now, ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-vm",
		Action: "Scheduling", Reason: "FailedScheduling", Type: corev1.EventTypeWarning,
		Note:      "0/3 nodes are available: 3 Insufficient cpu.",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p1", APIVersion: "v1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// core/v1 sees it, by the field selector kubectl describe uses.
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": "p1", "involvedObject.kind": "Pod"}.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("core/v1 events of p1: %d, want 1", len(list.Items))
	}
	ev := list.Items[0]
	if ev.Message != "0/3 nodes are available: 3 Insufficient cpu." || ev.Reason != "FailedScheduling" || ev.ReportingController != "default-scheduler" ||
		ev.InvolvedObject.Name != "p1" || ev.ResourceVersion != created.ResourceVersion || ev.UID != created.UID {
		t.Fatalf("core/v1 view: %+v", ev)
	}
	select {
	case e := <-w.ResultChan():
		if got, ok := e.Object.(*corev1.Event); e.Type != watch.Added || !ok || got.Name != "p1.sched" {
			t.Fatalf("core/v1 watch: %v %#v", e.Type, e.Object)
		}
	case <-ctx.Done():
		t.Fatal("the core/v1 watch saw nothing")
	}
	// A core/v1 Event is served by events.k8s.io, selected by its names there.
	if _, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "p2.old"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p2"},
		Reason:         "Pulled", Message: "pulled", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "kubelet"},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 3,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=p2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(v1list.Items) != 1 || v1list.Items[0].Note != "pulled" || v1list.Items[0].DeprecatedCount != 3 || v1list.Items[0].DeprecatedSource.Component != "kubelet" {
		t.Fatalf("events.k8s.io view: %+v", v1list.Items)
	}
	// Deleting through one API deletes it for both.
	if err := cs.EventsV1().Events(ns).Delete(ctx, "p2.old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Events(ns).Get(ctx, "p2.old", metav1.GetOptions{}); err == nil {
		t.Fatal("deleted through events.k8s.io, still served by core/v1")
	}
	// A patch through events.k8s.io keeps the object's other API's fields.
	if _, err := cs.EventsV1().Events(ns).Patch(ctx, "p1.sched", "application/merge-patch+json", []byte(`{"note":"0/4 nodes are available"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Events(ns).Get(ctx, "p1.sched", metav1.GetOptions{})
	if err != nil || got.Message != "0/4 nodes are available" || got.Reason != "FailedScheduling" {
		t.Fatalf("after the patch: %+v %v", got, err)
	}
}
