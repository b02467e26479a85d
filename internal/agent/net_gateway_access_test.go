package agent

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAccess answers SelfSubjectAccessReviews: allowed unless the resource is denied.
func fakeAccess(denied ...string) *fake.Clientset {
	kc := fake.NewClientset()
	kc.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = !slices.Contains(denied, r.Spec.ResourceAttributes.Resource)
		return true, r, nil
	})
	return kc
}

// TestGatewayDenied: the reads the credential lacks are named, verb by verb.
func TestGatewayDenied(t *testing.T) {
	for _, tc := range []struct {
		denied []string
		want   []string
	}{
		{nil, nil},
		{[]string{"secrets"}, []string{"list secrets", "watch secrets"}},
		{[]string{"routes", "endpointslices"}, []string{"list routes.kubeos.dev", "watch routes.kubeos.dev",
			"list endpointslices.discovery.k8s.io", "watch endpointslices.discovery.k8s.io"}},
	} {
		got, err := gatewayDenied(context.Background(), fakeAccess(tc.denied...))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("denied %v: got %v, %v; want %v", tc.denied, got, err, tc.want)
		}
	}
}

// TestWaitGatewayAccess: with the reads allowed the gateway goes on at once; without them
// it waits (and gives up when its context ends).
func TestWaitGatewayAccess(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if !waitGatewayAccess(context.Background(), fakeAccess(), log) {
		t.Error("allowed: waitGatewayAccess returned false")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if waitGatewayAccess(ctx, fakeAccess("secrets"), log) {
		t.Error("secrets denied: waitGatewayAccess returned true")
	}
}
