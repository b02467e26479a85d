package apiservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// ControllerName is the controller's name (its Lease is kube-system/kube-apiservice-registration).
const ControllerName = "apiservice-registration"

// resync is how often the APIServices are checked without a CRD change.
const resync = 30 * time.Second

// Controller keeps the local APIServices.
type Controller struct {
	disc discovery.DiscoveryInterface
	agg  aggregatorclient.Interface
	ext  apiextensionsclient.Interface
	log  *slog.Logger
}

// New makes the controller over cfg (JSON: the APIService client needs no protobuf).
func New(cfg *rest.Config, log *slog.Logger) (*Controller, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/json"
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{disc: disc, agg: agg, ext: ext, log: log}, nil
}

// Start syncs at once, whenever a CRD changes and every 30 s, until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	factory := apiextensionsinformers.NewSharedInformerFactory(c.ext, 0)
	crds := factory.Apiextensions().V1().CustomResourceDefinitions()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := crds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke,
		UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), crds.Informer().HasSynced) {
		return nil
	}
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		list, err := crds.Lister().List(labels.Everything())
		if err == nil {
			err = c.sync(ctx, list)
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("apiservice sync", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			// CRD changes come in bursts (create, then Established): let discovery catch up.
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return nil
			}
		case <-t.C:
		}
	}
}

func (c *Controller) sync(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	groups, err := c.disc.ServerGroups()
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	crdGVs := sets.New[schema.GroupVersion]()
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				crdGVs.Insert(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name})
			}
		}
	}
	existingList, err := c.agg.ApiregistrationV1().APIServices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	existing := make([]*apiregistrationv1.APIService, len(existingList.Items))
	for i := range existingList.Items {
		existing[i] = &existingList.Items[i]
	}
	api := c.agg.ApiregistrationV1().APIServices()
	create, update, del := Plan(existing, Desired(groups.Groups, crdGVs))
	var errs []error
	for _, a := range create {
		got, err := api.Create(ctx, a, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, err)
			continue
		}
		if err == nil {
			existing = append(existing, got)
		}
	}
	for _, a := range update {
		if _, err := api.Update(ctx, a, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	for _, name := range del {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	gone := sets.New(del...)
	for _, a := range existing {
		want := Available()
		if a.Spec.Service != nil || gone.Has(a.Name) || !NeedsStatus(a, want) {
			continue // a remote one's condition is the aggregator's
		}
		u := a.DeepCopy()
		want.LastTransitionTime = metav1.Now()
		u.Status.Conditions = setCondition(u.Status.Conditions, want)
		if _, err := api.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func setCondition(cs []apiregistrationv1.APIServiceCondition, c apiregistrationv1.APIServiceCondition) []apiregistrationv1.APIServiceCondition {
	for i := range cs {
		if cs[i].Type == c.Type {
			if cs[i].Status == c.Status {
				c.LastTransitionTime = cs[i].LastTransitionTime
			}
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}
