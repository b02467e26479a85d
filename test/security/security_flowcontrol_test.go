package security

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestFlowControlFlood: a flood from one ServiceAccount, whose FlowSchema sends it to a
// priority level that rejects rather than queues, is answered 429 with a Retry-After that
// grows while the flood goes on (as kube-apiserver's), while system:masters' GETs (the
// exempt level) keep succeeding.
func TestFlowControlFlood(t *testing.T) {
	securitySuite.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := adminClient(t)
	const ns, sa = "apf-flood", "flood"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fc := cs.FlowcontrolV1()
	zero := int32(0)
	plc := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kube-test-flood-reject"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &zero, LendablePercent: &zero,
				BorrowingLimitPercent: &zero, LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, plc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fc.PriorityLevelConfigurations().Delete(context.Background(), plc.Name, metav1.DeleteOptions{})
	})
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "kube-test-flood-sa"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: plc.Name},
			MatchingPrecedence: 100,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: sa}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"}}},
			}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.FlowSchemas().Delete(context.Background(), fs.Name, metav1.DeleteOptions{}) })

	floodCfg := baseConfig(t)
	floodCfg.BearerToken = tr.Status.Token
	flood, err := rest.HTTPClientFor(floodCfg)
	if err != nil {
		t.Fatal(err)
	}
	adminCfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := rest.HTTPClientFor(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(c *http.Client, host string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, host+"/api/v1/namespaces/"+ns+"/configmaps", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	// The ServiceAccount's requests reach the new FlowSchema once the controller's informers
	// have it.
	servertest.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		resp, err := get(flood, floodCfg.Host)
		if err != nil {
			return err
		}
		if got := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID); got != string(fs.UID) {
			return fmt.Errorf("the ServiceAccount's GET classified by FlowSchema UID %q (%d), want %s", got, resp.StatusCode, fs.UID)
		}
		return nil
	})

	// The flood: 32 loops until the test has seen what it wants.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rejected, maxRetryAfter, unexplained atomic.Int64
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := get(flood, floodCfg.Host)
				switch {
				case err != nil:
					if ctx.Err() == nil {
						unexplained.Add(1)
					}
				case resp.StatusCode == http.StatusTooManyRequests:
					rejected.Add(1)
					ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
					if err != nil || ra < 1 {
						unexplained.Add(1)
					}
					for cur := maxRetryAfter.Load(); int64(ra) > cur && !maxRetryAfter.CompareAndSwap(cur, int64(ra)); cur = maxRetryAfter.Load() {
					}
				case resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusOK:
					unexplained.Add(1) // admitted: 403 (no RBAC) or 200; nothing else
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	var adminOK int
	servertest.Eventually(t, 90*time.Second, 100*time.Millisecond, func() error {
		resp, err := get(admin, adminCfg.Host)
		if err != nil {
			t.Fatalf("system:masters GET during the flood: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("system:masters GET during the flood: %d", resp.StatusCode)
		}
		adminOK++
		if maxRetryAfter.Load() < 2 || adminOK < 3 {
			return fmt.Errorf("%d rejected, largest Retry-After %d, %d admin GETs served", rejected.Load(), maxRetryAfter.Load(), adminOK)
		}
		return nil
	})
	if n := unexplained.Load(); n > 0 {
		t.Fatalf("%d flood requests failed otherwise than 429 with Retry-After, 403 or 200", n)
	}
}
