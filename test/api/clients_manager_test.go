package api

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// stamper is a controller-runtime reconciler that stamps every ConfigMap of a namespace with
// an annotation.
type stamper struct{ client client.Client }

func (s *stamper) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := s.client.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Annotations["stamped"] == "yes" {
		return ctrl.Result{}, nil
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["stamped"] = "yes"
	return ctrl.Result{}, s.client.Update(ctx, &cm)
}

// TestControllerRuntimeManager starts a Manager with leader election on a Lease (all its
// writes protobuf, as controller-runtime sends them): it becomes leader, and its controller
// reconciles ConfigMaps.
func TestControllerRuntimeManager(t *testing.T) {
	clientsSuite.Need(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", clientsSrv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "manager"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:          true,
		LeaderElectionID:        "stamper-lock",
		LeaderElectionNamespace: "kube-system",
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(&stamper{client: mgr.GetClient()}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	}()

	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the manager did not become leader within 60 s")
	}
	reader := mgr.GetAPIReader()
	var lease coordinationv1.Lease
	if err := reader.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "stamper-lock"}, &lease); err != nil {
		t.Fatalf("leader lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("the lease has no holder: %+v", lease.Spec)
	}

	c := mgr.GetClient()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stamp-me"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller to stamp the configmap", func() bool {
		var cm corev1.ConfigMap
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stamp-me"}, &cm); err != nil {
			return false
		}
		return cm.Annotations["stamped"] == "yes"
	})
	// The lease keeps being renewed by the leader (PUT with the last resourceVersion).
	first := lease.Spec.RenewTime.Time
	waitFor(t, "a lease renewal", func() bool {
		var l coordinationv1.Lease
		return reader.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "stamper-lock"}, &l) == nil && l.Spec.RenewTime.After(first)
	})
}
