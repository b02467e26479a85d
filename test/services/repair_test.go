package services

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"kubeos.dev/kube/internal/server/servertest"
)

// repairDeadline bounds what the repair loop does after its grace period: upstream deletes
// a leaked IPAddress once it is 60 s old.
const repairDeadline = 3 * time.Minute

// storeService writes a Service straight into storage, bypassing allocation: what a crash
// or a bug could leave behind, for the repair loop to find.
func storeService(t *testing.T, s *corev1.Service) {
	t.Helper()
	k, ok := srv.Inner().Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "services"})
	if !ok {
		t.Fatal("services not served")
	}
	s.APIVersion, s.Kind = "v1", "Service"
	s.UID = types.UID(uuid.NewUUID())
	s.CreationTimestamp = metav1.Now()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	if _, err := srv.Inner().Store.Create(context.Background(), k.Key(s.Namespace, s.Name), &unstructured.Unstructured{Object: u}); err != nil {
		t.Fatal(err)
	}
}

// event waits for an events.k8s.io/v1 Event with reason about the object named regarding.
func event(t *testing.T, ns, reason, regarding string) *eventsv1.Event {
	t.Helper()
	var found *eventsv1.Event
	servertest.Eventually(t, repairDeadline, time.Second, func() error {
		list, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i, e := range list.Items {
			if e.Reason == reason && e.Regarding.Name == regarding {
				found = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no %s event about %s in %s among %d", reason, regarding, ns, len(list.Items))
	})
	return found
}

// An IPAddress whose Service does not exist (a server died between reserving the address
// and storing the Service) is deleted by the repair loop after its grace period. The
// addresses these tests set by hand are in the range's static band (its first 256
// addresses), which dynamic allocation takes only when the rest is full: elsewhere a
// Service of a parallel test could draw it at random first.
func TestLeakedIPAddressRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	leak := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "10.100.0.199", Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: "IPv4", networkingv1.LabelManagedBy: "ipallocator.k8s.io"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "ghost"}},
	}
	if _, err := cs.NetworkingV1().IPAddresses().Create(ctx, leak, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// While it exists nobody else can have the address.
	_, err := cs.CoreV1().Services("default").Create(ctx, service("wants-leaked", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.100.0.199" }), metav1.CreateOptions{})
	invalid(t, err, "spec.clusterIPs", "provided IP is already allocated")
	servertest.Eventually(t, repairDeadline, time.Second, func() error {
		_, err := cs.NetworkingV1().IPAddresses().Get(ctx, "10.100.0.199", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("leaked IPAddress still there: %v", err)
	})
	event(t, "default", "IPAddressNotAllocated", "10.100.0.199")
	if _, err := cs.CoreV1().Services("default").Create(ctx, service("wants-leaked", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "10.100.0.199" }), metav1.CreateOptions{}); err != nil {
		t.Fatalf("repaired address not allocatable: %v", err)
	}
}

// A Service whose cluster IP has no IPAddress gets one, with an event saying so.
func TestMissingIPAddressRepaired(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "repair-missing")
	storeService(t, service("orphan", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
		s.Namespace = ns
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.100.0.188", []string{"10.100.0.188"}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		pol := corev1.IPFamilyPolicySingleStack
		s.Spec.IPFamilyPolicy = &pol
	}))
	servertest.Eventually(t, repairDeadline, time.Second, func() error {
		_, err := cs.NetworkingV1().IPAddresses().Get(context.Background(), "10.100.0.188", metav1.GetOptions{})
		return err
	})
	checkIPAddress(t, "10.100.0.188", ns, "orphan")
	event(t, ns, "ClusterIPNotAllocated", "orphan")
}

// Two Services on one cluster IP (never allocated so; written behind the allocator's back)
// are reported as an event, as upstream's repair loop reports them.
func TestDuplicateClusterIPReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, "repair-duplicate")
	a, err := cs.CoreV1().Services(ns).Create(ctx, service("first", corev1.ServiceTypeClusterIP), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	storeService(t, service("second", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
		s.Namespace = ns
		s.Spec.ClusterIP, s.Spec.ClusterIPs = a.Spec.ClusterIP, a.Spec.ClusterIPs
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = a.Spec.IPFamilies, a.Spec.IPFamilyPolicy
	}))
	e := event(t, ns, "ClusterIPAlreadyAllocated", "second")
	if e.Type != corev1.EventTypeWarning || e.ReportingController != "ipallocator-repair-controller" {
		t.Fatalf("event %+v", e)
	}
	// The address stays with the Service that was allocated it.
	checkIPAddress(t, a.Spec.ClusterIP, ns, "first")
}
