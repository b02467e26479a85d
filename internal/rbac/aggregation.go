package rbac

import (
	"context"
	"log/slog"
	"reflect"
	"sort"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// AggregatedRules is the rules role (which has an aggregationRule) should have: the rules of
// every other ClusterRole matched by one of its selectors, in the order of the roles' names,
// each rule once. Pure; all is not changed.
func AggregatedRules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) []rbacv1.PolicyRule {
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	out := []rbacv1.PolicyRule{}
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			continue // validation refuses bad selectors; an old one matches nothing
		}
		for _, r := range sorted {
			if r.Name == role.Name || !s.Matches(labels.Set(r.Labels)) {
				continue
			}
			for _, rule := range r.Rules {
				if !containsRule(out, rule) {
					out = append(out, *rule.DeepCopy())
				}
			}
		}
	}
	return out
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for i := range rules {
		if reflect.DeepEqual(rules[i], r) {
			return true
		}
	}
	return false
}

// AggregationController keeps the rules of ClusterRoles with an aggregationRule equal to
// AggregatedRules. Level-based: every change to any ClusterRole re-checks every aggregated
// role (there are few) and writes those that differ, with a resourceVersion precondition.
type AggregationController struct {
	Client kubernetes.Interface
	Log    *slog.Logger
}

// Start runs the controller until ctx ends.
func (c *AggregationController) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(c.Client, 0)
	inf := f.Rbac().V1().ClusterRoles()
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	f.WaitForCacheSync(ctx.Done())
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-retry.C:
		}
		all, err := inf.Lister().List(labels.Everything())
		if err == nil {
			err = c.sync(ctx, all)
		}
		if err != nil && ctx.Err() == nil {
			level := slog.LevelWarn
			if apierrors.IsConflict(err) {
				level = slog.LevelDebug // the cache was behind a write; the retry sees it
			}
			c.Log.Log(ctx, level, "clusterrole aggregation", "err", err)
			retry.Reset(backoff)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

func (c *AggregationController) sync(ctx context.Context, all []*rbacv1.ClusterRole) error {
	var firstErr error
	for _, r := range all {
		if r.AggregationRule == nil {
			continue
		}
		want := AggregatedRules(r, all)
		if reflect.DeepEqual(want, r.Rules) || (len(want) == 0 && len(r.Rules) == 0) {
			continue
		}
		upd := r.DeepCopy() // objects from the cache are read-only
		upd.Rules = want
		if _, err := c.Client.RbacV1().ClusterRoles().Update(ctx, upd, metav1.UpdateOptions{}); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
