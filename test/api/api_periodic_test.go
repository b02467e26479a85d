package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

// Periodic work that upstream's conformance suite waits for (compaction, the quota
// controller's full resync), each on a server of its own with the period shortened by the
// flag kube-apiserver and kube-controller-manager have for it.

// ownServer runs a server of the test's own with options changed by mutate and returns an
// admin client of it.
func ownServer(t *testing.T, mutate func(*server.Options)) kubernetes.Interface {
	t.Helper()
	s, err := servertest.StartWith(t.TempDir(), nil, mutate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// A continue token whose revision --etcd-compaction-interval compacted away answers 410 with
// kube-apiserver's message and an inconsistent continue token, which goes on from the same
// key at the newest revision (conformance: chunking "should support continue listing from
// the last key if the original version has been compacted away, though the list is
// inconsistent"). The first page comes from the watch cache, whose snapshot must expire
// with the compaction.
func TestListContinueAfterCompaction(t *testing.T) {
	cs := ownServer(t, func(o *server.Options) { o.CompactionInterval = time.Second })
	ctx := t.Context()
	ns := "chunking"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// PodTemplates, as upstream's test: no controller adds any to the namespace.
	cms := cs.CoreV1().PodTemplates(ns)
	tmpl := func(name string) *corev1.PodTemplate {
		return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}
	}
	for i := range 30 {
		if _, err := cms.Create(ctx, tmpl(fmt.Sprintf("cm-%02d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 20 {
		t.Fatalf("first page: continue %q, remaining %d", first.Continue, ptrValue(first.RemainingItemCount))
	}
	// Created after the first page: the inconsistent rest of the list shows it.
	if _, err := cms.Create(ctx, tmpl("zz-late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var expired *apierrors.StatusError
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: first.Continue})
		switch {
		case err == nil:
			return false, nil
		case apierrors.IsResourceExpired(err):
			expired, _ = err.(*apierrors.StatusError)
			return expired != nil, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the first page's continue token never expired: %v", err)
	}
	st := expired.Status()
	if !strings.Contains(st.Message, "too old to display a consistent list result") || st.Continue == "" {
		t.Fatalf("410 without kube-apiserver's message or an inconsistent continue token: %+v", st)
	}

	page, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: st.Continue})
	if err != nil {
		t.Fatalf("list with the inconsistent token: %v", err)
	}
	if page.ResourceVersion == first.ResourceVersion || len(page.Items) != 10 || page.Items[0].Name != "cm-10" {
		t.Fatalf("inconsistent page: rv %s (first page %s), %d items from %q", page.ResourceVersion, first.ResourceVersion, len(page.Items), page.Items[0].Name)
	}
	if page.RemainingItemCount == nil || *page.RemainingItemCount != 11 {
		t.Fatalf("inconsistent page: remaining %d, want 11 (cm-20…cm-29 and zz-late)", ptrValue(page.RemainingItemCount))
	}
	rv := page.ResourceVersion
	var rest []string
	for page.Continue != "" {
		if page, err = cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: page.Continue}); err != nil {
			t.Fatal(err)
		}
		if page.ResourceVersion != rv {
			t.Errorf("page at rv %s, the inconsistent list is at %s", page.ResourceVersion, rv)
		}
		for _, pt := range page.Items {
			rest = append(rest, pt.Name)
		}
	}
	if len(rest) != 11 || rest[0] != "cm-20" || rest[10] != "zz-late" {
		t.Errorf("rest of the inconsistent list: %v", rest)
	}
}

// A ResourceQuota's status written by a client is reset to the quota controller's by the
// next full resync, every --resource-quota-sync-period (conformance: ResourceQuota "should
// apply changes to a resourcequota status"; the controller ignores status-only updates, as
// upstream's).
func TestResourceQuotaStatusResetByResync(t *testing.T) {
	cs := ownServer(t, func(o *server.Options) { o.ResourceQuotaSyncPeriod = time.Second })
	ctx := t.Context()
	ns := "quota-status"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rqs := cs.CoreV1().ResourceQuotas(ns)
	hard := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if _, err := rqs.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "rq"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	statusIs := func(cpu string) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			rq, err := rqs.Get(ctx, "rq", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return rq.Status.Hard.Cpu().Equal(resource.MustParse(cpu)), nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, statusIs("1")); err != nil {
		t.Fatalf("the quota controller never wrote status.hard: %v", err)
	}
	patched, err := rqs.Patch(ctx, "rq", types.StrategicMergePatchType, []byte(`{"status":{"hard":{"cpu":"2","memory":"2Gi"}}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if !patched.Status.Hard.Cpu().Equal(resource.MustParse("2")) || !patched.Spec.Hard.Cpu().Equal(resource.MustParse("1")) {
		t.Fatalf("status patch: spec %v, status %v", patched.Spec.Hard, patched.Status.Hard)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, statusIs("1")); err != nil {
		t.Fatalf("status.hard was not reset to the spec by the resync: %v", err)
	}
}

// ptrValue is *p, or -1 for nil.
func ptrValue(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
