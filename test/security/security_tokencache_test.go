package security

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
)

// Bearer tokens are authenticated through a cache of successes, as in kube-apiserver
// (filters.CachedTokens): a token keeps working for up to 10 s after it stops being valid,
// and a refused token is checked again on every request.

// whoami asks the server who token is (SelfSubjectReview); an error is the server's answer
// (401 for a refused token).
func whoami(ctx context.Context, t *testing.T, token string) (string, error) {
	t.Helper()
	cfg := baseConfig(t)
	cfg.BearerToken = token
	r, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// tokenReview is the admin's TokenReview of token for audiences.
func tokenReview(ctx context.Context, t *testing.T, admin kubernetes.Interface, token string, audiences ...string) authenticationv1.TokenReviewStatus {
	t.Helper()
	r, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	return r.Status
}

// namespaceWithServiceAccount makes a namespace named prefix plus a random suffix (deleted
// when the test ends) holding ServiceAccount sa.
func namespaceWithServiceAccount(ctx context.Context, t *testing.T, admin kubernetes.Interface, prefix, sa string) (string, string) {
	t.Helper()
	ns := prefix + rand.String(5)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns, sa
}

// refusedEveryTime checks that token is answered 401 on each of n requests.
func refusedEveryTime(ctx context.Context, t *testing.T, token string, n int) {
	t.Helper()
	for i := range n {
		if who, err := whoami(ctx, t, token); !apierrors.IsUnauthorized(err) {
			t.Fatalf("request %d: %q, %v; want 401 Unauthorized", i+1, who, err)
		}
	}
}

// TestServiceAccountTokenAfterDelete: a ServiceAccount's token authenticates requests and
// TokenReview alike; TokenReview for another audience refuses it even while the request
// path's success is cached; once the ServiceAccount is deleted, requests and TokenReview
// refuse the token within a bounded wait (the 10 s cache, as kube-apiserver's) and keep
// refusing it, also after a ServiceAccount of the same name is created again.
func TestServiceAccountTokenAfterDelete(t *testing.T) {
	securitySuite.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := adminClient(t)
	ns, sa := namespaceWithServiceAccount(ctx, t, admin, "tokencache-", "deleted-soon")
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, user := tr.Status.Token, "system:serviceaccount:"+ns+":"+sa

	for range 3 {
		if who, err := whoami(ctx, t, token); err != nil || who != user {
			t.Fatalf("whoami with the token: %q, %v; want %q", who, err, user)
		}
	}
	st := tokenReview(ctx, t, admin, token)
	if !st.Authenticated || st.User.Username != user || len(st.Audiences) != 1 || st.Audiences[0] != tr.Spec.Audiences[0] {
		t.Fatalf("TokenReview: %+v; want %s for the token's audience %v", st, user, tr.Spec.Audiences)
	}
	if st := tokenReview(ctx, t, admin, token, "https://vault.example"); st.Authenticated || st.Error == "" {
		t.Fatalf("TokenReview for another audience: %+v; want refused with an error", st)
	}

	if err := admin.CoreV1().ServiceAccounts(ns).Delete(ctx, sa, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if who, err := whoami(ctx, t, token); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("whoami after the ServiceAccount's deletion: %q, %v; want 401", who, err)
		}
		if st := tokenReview(ctx, t, admin, token); st.Authenticated {
			return fmt.Errorf("TokenReview after the ServiceAccount's deletion: authenticated as %s", st.User.Username)
		}
		return nil
	})
	refusedEveryTime(ctx, t, token, 3)

	// The same name again is another ServiceAccount (another UID): the old token stays refused.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedEveryTime(ctx, t, token, 3)
	if st := tokenReview(ctx, t, admin, token); st.Authenticated {
		t.Fatalf("TokenReview after re-creation: authenticated as %s", st.User.Username)
	}
}

// TestRefusedTokenNotCached: a bad token is 401 on every request; a bootstrap token refused
// because its Secret does not exist yet works once the Secret is created (a refusal is not
// remembered), and is refused again within a bounded wait once the Secret is deleted.
func TestRefusedTokenNotCached(t *testing.T) {
	securitySuite.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := adminClient(t)
	refusedEveryTime(ctx, t, "not-"+staticToken, 5)
	// No token at all is the reviewer's mistake: 400, as kube-apiserver answers.
	_, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "token is required for TokenReview") {
		t.Fatalf("TokenReview without a token: %v; want 400 token is required", err)
	}

	// Bootstrap token ids are [a-z0-9]{6}, secrets [a-z0-9]{16}.
	id, secret := rand.String(6), rand.String(16)
	token, user := id+"."+secret, "system:bootstrap:"+id
	refusedEveryTime(ctx, t, token, 5)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type: corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true",
			"expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
	if _, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Secrets(metav1.NamespaceSystem).Delete(context.Background(), sec.Name, metav1.DeleteOptions{})
	})
	eventually(t, time.Minute, func() error {
		if who, err := whoami(ctx, t, token); err != nil || who != user {
			return fmt.Errorf("whoami with the bootstrap token after its Secret was created: %q, %v; want %s", who, err, user)
		}
		return nil
	})
	if st := tokenReview(ctx, t, admin, token); !st.Authenticated || st.User.Username != user {
		t.Fatalf("TokenReview of the bootstrap token: %+v", st)
	}
	if st := tokenReview(ctx, t, admin, token, "https://vault.example"); st.Authenticated {
		t.Fatalf("TokenReview of the bootstrap token for another audience: %+v; want refused", st)
	}

	if err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, sec.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if who, err := whoami(ctx, t, token); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("whoami after the bootstrap Secret's deletion: %q, %v; want 401", who, err)
		}
		return nil
	})
	refusedEveryTime(ctx, t, token, 3)
}

// TestPodBoundTokenAfterPodDelete: a token bound to a pod (TokenRequest's boundObjectRef, as
// the kubelet asks for projected tokens) works while the pod exists and is refused, within
// a bounded wait (the token cache's 10 s), once the pod is deleted, as kube-apiserver's
// validator refuses it.
func TestPodBoundTokenAfterPodDelete(t *testing.T) {
	securitySuite.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := adminClient(t)
	ns, sa := namespaceWithServiceAccount(ctx, t, admin, "podbound-", "runner")
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{
		ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
		Containers: []corev1.Container{{Name: "c", Image: "example.com/app:1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":" + sa
	if who, err := whoami(ctx, t, tr.Status.Token); err != nil || who != user {
		t.Fatalf("whoami with the pod's token: %q, %v; want %q", who, err, user)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		if who, err := whoami(ctx, t, tr.Status.Token); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("the token of a deleted pod still answers %q, %v", who, err)
		}
		return nil
	})
	refusedEveryTime(ctx, t, tr.Status.Token, 2)
	if st := tokenReview(ctx, t, admin, tr.Status.Token); st.Authenticated {
		t.Errorf("TokenReview authenticated the token of a deleted pod: %+v", st)
	}
}
