package sharedinformers

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// SelectorIndex is the name of the index SelectorMappedPods adds to the Service informer:
// each Service with a selector under one label of it, "<namespace>/<key>=<value>" (the
// smallest key; the LabelIndex key of a pod with that label), one with an empty selector
// under "<namespace>/*", one without a selector under nothing.
const SelectorIndex = "kube.selector"

// allPods is the SelectorIndex key suffix of an empty selector (it matches every pod).
const allPods = "*"

func selectorIndexFunc(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || svc.Spec.Selector == nil { // nil selects nothing (upstream's getServicesForPod)
		return nil, nil
	}
	if len(svc.Spec.Selector) == 0 {
		return []string{svc.Namespace + "/" + allPods}, nil
	}
	k := slices.Min(keysOf(svc.Spec.Selector))
	return []string{labelKey(svc.Namespace, k, svc.Spec.Selector[k])}, nil
}

func keysOf(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// SelectorMappedPods hands an upstream endpoints or endpointslice controller (v1.37's
// NewEndpointController, NewController) a pod informer and a Service informer wired so that
// a pod's change finds its Services through SelectorIndex instead of matching every Service
// of the namespace.
//
// Upstream's pod handler turns each pod change into a PodProjectionKey (namespace and
// labels) and its pod worker calls endpointsliceutil.GetServicesToUpdate with the Service
// lister, which lists every Service of the namespace and matches each selector: ~2 µs per
// Service per pod change, 20 ms per pod change at 10,000 Services, most of the controller's
// CPU and the queue the latency of slices waits in. Here the pod handler the controller
// registers is replaced by one that makes the same key with upstream's
// GetPodUpdateProjectionKey and calls upstream's GetServicesToUpdate with a lister whose
// namespace List answers only the Services indexed under one of the key's labels (every
// Service that can match is among them; upstream still matches each), then hands each
// Service's key to the Service handler the controller registered, as its own pod worker
// would have queued it. Upstream's pod queue stays empty.
//
// The handler the controller registers on pods is the one it makes in its constructor;
// anything else registered through the returned pod informer is replaced the same way, so
// the informers are for that one constructor. With a batch period (the Service is queued
// after a delay from a pod change, not at once) the handlers are left as upstream's:
// pods and services are returned unchanged.
func SelectorMappedPods(pods coreinformers.PodInformer, services coreinformers.ServiceInformer, batchPeriod time.Duration) (coreinformers.PodInformer, coreinformers.ServiceInformer, error) {
	if batchPeriod > 0 {
		return pods, services, nil
	}
	inf := services.Informer()
	has := func() bool { _, ok := inf.GetIndexer().GetIndexers()[SelectorIndex]; return ok }
	if !has() {
		if err := inf.AddIndexers(cache.Indexers{SelectorIndex: selectorIndexFunc}); err != nil && !has() {
			return nil, nil, err
		}
	}
	m := &podServiceMapper{services: services.Lister(), indexer: inf.GetIndexer()}
	return mappedPods{PodInformer: pods, m: m}, capturedServices{ServiceInformer: services, m: m}, nil
}

// podServiceMapper is what the replaced pod handler needs: the Services and the handler the
// controller registered on them.
type podServiceMapper struct {
	services corelisters.ServiceLister
	indexer  cache.Indexer
	// serviceHandlers are the controller's Service handlers; a pod's Services go to them as
	// updates of cache.ExplicitKey (upstream's handlers key what they get with KeyFunc).
	serviceHandlers []cache.ResourceEventHandler
}

// onPod is the pod handler: upstream's key, upstream's mapping over the candidates.
func (m *podServiceMapper) onPod(old, cur any) {
	key := endpointsliceutil.GetPodUpdateProjectionKey(old, cur)
	if key == nil {
		return
	}
	l := candidateServices{ServiceLister: m.services, namespace: key.Namespace,
		candidates: m.candidates(key.Namespace, key.Labels, key.OldLabels)}
	svcs, err := endpointsliceutil.GetServicesToUpdate(l, key)
	if err != nil {
		return // the candidates' List cannot fail
	}
	for s := range svcs {
		for _, h := range m.serviceHandlers {
			h.OnUpdate(cache.ExplicitKey(s), cache.ExplicitKey(s))
		}
	}
}

// candidates are the Services of namespace indexed under "*" or under a label of cur or
// old: a superset of those whose selector matches either, each once (a Service is indexed
// under one key; a label old shares with cur is read once).
func (m *podServiceMapper) candidates(namespace string, cur, old labels.Set) []*corev1.Service {
	var out []*corev1.Service
	add := func(key string) {
		objs, _ := m.indexer.ByIndex(SelectorIndex, key)
		for _, o := range objs {
			if s, ok := o.(*corev1.Service); ok {
				out = append(out, s)
			}
		}
	}
	add(namespace + "/" + allPods)
	for k, v := range cur {
		add(labelKey(namespace, k, v))
	}
	for k, v := range old {
		if w, ok := cur[k]; !ok || w != v {
			add(labelKey(namespace, k, v))
		}
	}
	return out
}

// candidateServices is the Service lister one pod change's mapping reads: its List in the
// pod's namespace answers the change's candidates that the selector matches (upstream's
// GetServicesToUpdate lists once for the new labels and once for the old).
type candidateServices struct {
	corelisters.ServiceLister
	namespace  string
	candidates []*corev1.Service
}

func (l candidateServices) Services(namespace string) corelisters.ServiceNamespaceLister {
	return candidateNamespace{ServiceNamespaceLister: l.ServiceLister.Services(namespace), l: l, namespace: namespace}
}

type candidateNamespace struct {
	corelisters.ServiceNamespaceLister
	l         candidateServices
	namespace string
}

func (n candidateNamespace) List(sel labels.Selector) ([]*corev1.Service, error) {
	if n.namespace != n.l.namespace {
		return n.ServiceNamespaceLister.List(sel)
	}
	var out []*corev1.Service
	for _, s := range n.l.candidates {
		if sel.Matches(labels.Set(s.Labels)) {
			out = append(out, s)
		}
	}
	return out, nil
}

// capturedServices records the handlers the controller registers on Services.
type capturedServices struct {
	coreinformers.ServiceInformer
	m *podServiceMapper
}

func (s capturedServices) Informer() cache.SharedIndexInformer {
	return handlerInformer{SharedIndexInformer: s.ServiceInformer.Informer(), swap: func(h cache.ResourceEventHandler) cache.ResourceEventHandler {
		s.m.serviceHandlers = append(s.m.serviceHandlers, h)
		return h
	}}
}

// mappedPods replaces the handlers the controller registers on pods with the mapper's.
type mappedPods struct {
	coreinformers.PodInformer
	m *podServiceMapper
}

func (p mappedPods) Informer() cache.SharedIndexInformer {
	return handlerInformer{SharedIndexInformer: p.PodInformer.Informer(), swap: func(cache.ResourceEventHandler) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.m.onPod(nil, obj) },
			UpdateFunc: p.m.onPod,
			DeleteFunc: func(obj any) { p.m.onPod(obj, nil) },
		}
	}}
}

// handlerInformer registers swap(h) for every handler h registered through it.
type handlerInformer struct {
	cache.SharedIndexInformer
	swap func(cache.ResourceEventHandler) cache.ResourceEventHandler
}

func (i handlerInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.swap(h))
}

func (i handlerInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, p time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.swap(h), p)
}

func (i handlerInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.swap(h), o)
}
