package workload

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestAPIServices: apiregistration.k8s.io/v1 is served with a local APIService for every
// served group-version (Available, reason Local, automanaged), one appears and goes with a
// CRD's group, a user's APIService naming a missing service is kept and says so, and
// upstream's validation refuses a bad one.
func TestAPIServices(t *testing.T) {
	ctx := ctxT(t)
	agg, err := aggregatorclient.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	api := agg.ApiregistrationV1().APIServices()
	available := func(name, status, reason string) func() error {
		return func() error {
			a, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range a.Status.Conditions {
				if c.Type == apiregistrationv1.Available && string(c.Status) == status && c.Reason == reason {
					return nil
				}
			}
			return fmt.Errorf("%s: conditions %+v", name, a.Status.Conditions)
		}
	}
	for _, name := range []string{"v1.", "v1.apps", "v1.apiregistration.k8s.io", "v1alpha1.kubeos.dev"} {
		servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, available(name, "True", "Local"))
	}
	core, _ := api.Get(ctx, "v1.", metav1.GetOptions{})
	apps, _ := api.Get(ctx, "v1.apps", metav1.GetOptions{})
	if core.Labels["kube-aggregator.kubernetes.io/automanaged"] != "onstart" || core.Spec.Service != nil ||
		core.Spec.GroupPriorityMinimum <= apps.Spec.GroupPriorityMinimum {
		t.Errorf("v1.: %v %+v (apps %d)", core.Labels, core.Spec, apps.Spec.GroupPriorityMinimum)
	}
	k := newKubectl(t, "1.33")
	out := k.ok("", "get", "apiservices")
	if !strings.Contains(out, "SERVICE") || !strings.Contains(out, "AVAILABLE") || !regexp.MustCompile(`(?m)^v1\.apps\s+Local\s+True\s`).MatchString(out) {
		t.Fatalf("kubectl get apiservices:\n%s", out)
	}

	// A CRD's group gets its APIService (automanaged true), which goes with the CRD.
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.apisvc.example.com}
spec:
  group: apisvc.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
`
	k.ok(crd, "apply", "-f", "-")
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, available("v1.apisvc.example.com", "True", "Local"))
	if a, _ := api.Get(ctx, "v1.apisvc.example.com", metav1.GetOptions{}); a.Labels["kube-aggregator.kubernetes.io/automanaged"] != "true" {
		t.Errorf("CRD APIService labels %v", a.Labels)
	}
	k.ok("", "delete", "crd", "widgets.apisvc.example.com")
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		if _, err := api.Get(ctx, "v1.apisvc.example.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("after the CRD's deletion: %v", err)
		}
		return nil
	})

	// A user's APIService for an extension server whose Service does not exist: kept, and
	// not Available (the aggregator's check).
	port := int32(443)
	user := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", InsecureSkipTLSVerify: true,
			GroupPriorityMinimum: 100, VersionPriority: 100,
			Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: &port}}}
	if _, err := api.Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(ctx, user.Name, metav1.DeleteOptions{}) })
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, available(user.Name, "False", "ServiceNotFound"))

	// Upstream's validation: the name must be <version>.<group>.
	bad := user.DeepCopy()
	bad.Name = "metrics"
	if _, err := api.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("APIService named %q: %v", bad.Name, err)
	}
}
