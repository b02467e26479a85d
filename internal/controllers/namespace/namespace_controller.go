package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"kubeos.dev/kube/internal/controllers/recorder"
)

// Controller deletes the content of deleted namespaces.
type Controller struct {
	cfg       *rest.Config
	events    *recorder.Recorder
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger
	factory   informers.SharedInformerFactory
	lister    corelisters.NamespaceLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller on a client configuration.
func New(cfg *rest.Config, log *slog.Logger) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, client: cs, dynamic: dyn, discovery: cs.Discovery(), log: log}, nil
}

// Start runs the controller until ctx ends. It can be called again after it returned (a
// new leadership term): informers, queue and event recorder are made afresh.
func (c *Controller) Start(ctx context.Context) error {
	rec, err := recorder.Start(ctx, c.cfg, "namespace-controller")
	if err != nil {
		return err
	}
	defer rec.Stop()
	c.events = rec
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"})
	defer c.queue.ShutDown()
	c.factory = informers.NewSharedInformerFactory(c.client, 0)
	inf := c.factory.Core().V1().Namespaces()
	c.lister = inf.Lister()
	c.synced = inf.Informer().HasSynced
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("namespace informer did not sync")
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.processNext(ctx) {
	}
	return nil
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	retry, err := c.reconcile(ctx, name)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.log.Warn("namespace deletion", "namespace", name, "err", err)
		}
		c.queue.AddRateLimited(name)
	case retry:
		c.queue.AddRateLimited(name)
	default:
		c.queue.Forget(name)
	}
	return true
}

// reconcile deletes the content of one terminating namespace; retry says content remains.
func (c *Controller) reconcile(ctx context.Context, name string) (retry bool, err error) {
	ns, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if ns.DeletionTimestamp == nil {
		return false, nil
	}
	resources, err := c.namespacedResources()
	if err != nil && len(resources) == 0 {
		return false, err
	}
	c.events.Eventf(ns, nil, corev1.EventTypeNormal, "DeletingContent", "DeleteContent", "deleting all content of namespace %s", name)
	remaining := map[string]int{}
	finalizers := map[string]int{}
	for _, gvr := range resources {
		client := c.dynamic.Resource(gvr).Namespace(name)
		if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			return false, fmt.Errorf("delete %s in %s: %w", gvr.Resource, name, err)
		}
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("list %s in %s: %w", gvr.Resource, name, err)
		}
		if n := len(list.Items); n > 0 {
			remaining[gvr.GroupResource().String()] = n
			for _, it := range list.Items {
				for _, f := range it.GetFinalizers() {
					finalizers[f]++
				}
			}
		}
	}
	if len(remaining) > 0 {
		c.events.Eventf(ns, nil, corev1.EventTypeNormal, "ContentRemaining", "DeleteContent",
			"waiting for content to go: %s", describe(remaining, "instances"))
		return true, c.setConditions(ctx, ns, remaining, finalizers)
	}
	// Empty: drop our finalizer so the namespace goes.
	ns = ns.DeepCopy()
	var keep []corev1.FinalizerName
	for _, f := range ns.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes {
			keep = append(keep, f)
		}
	}
	ns.Spec.Finalizers = keep
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	c.events.Eventf(ns, nil, corev1.EventTypeNormal, "ContentDeleted", "Finalize", "all content deleted; namespace finalized")
	return false, nil
}

// setConditions records what still blocks the namespace.
func (c *Controller) setConditions(ctx context.Context, ns *corev1.Namespace, remaining, finalizers map[string]int) error {
	ns = ns.DeepCopy()
	now := metav1.Now()
	set := func(t corev1.NamespaceConditionType, ok bool, reason, msg string) {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
		}
		for i := range ns.Status.Conditions {
			if ns.Status.Conditions[i].Type == t {
				cond := &ns.Status.Conditions[i]
				if cond.Status != status || cond.Message != msg {
					cond.LastTransitionTime = now
				}
				cond.Status, cond.Reason, cond.Message = status, reason, msg
				return
			}
		}
		ns.Status.Conditions = append(ns.Status.Conditions, corev1.NamespaceCondition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	set(corev1.NamespaceContentRemaining, len(remaining) > 0, "SomeResourcesRemain", "Some resources are remaining: "+describe(remaining, "instances"))
	if len(finalizers) > 0 {
		set(corev1.NamespaceFinalizersRemaining, true, "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "+describe(finalizers, "resource instances"))
	} else {
		set(corev1.NamespaceFinalizersRemaining, false, "ContentHasNoFinalizers", "All content-preserving finalizers finished")
	}
	_, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func describe(counts map[string]int, unit string) string {
	parts := make([]string, 0, len(counts))
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s has %d %s", k, n, unit))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// namespacedResources lists every namespaced resource that can be listed and deleted.
func (c *Controller) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out, err
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
