package builtin

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodSource reads pods for the plugins that look pods up by name or namespace
// (NodeRestriction on a node's evictions, deletes and tokens; PodSecurity when a namespace's
// labels change). Pods are the one kind whose count grows with the cluster: an informer
// would hold a typed copy of every pod beside the API server's own cache, so the server
// hands the plugins its watch cache instead. Errors are API status errors (404 for a pod
// that does not exist). Returned pods are the caller's.
type PodSource interface {
	GetPod(namespace, name string) (*corev1.Pod, error)
	// ListPods lists the pods of a namespace ("" for all) that match selector.
	ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error)
}

// withPods is factory with its pod informer replaced by src: the plugins read pods through
// src; no pod informer is created or started.
func withPods(factory informers.SharedInformerFactory, src PodSource) informers.SharedInformerFactory {
	return podsFactory{factory, sourceInformer{src}}
}

type podsFactory struct {
	informers.SharedInformerFactory
	pods corev1informers.TypedPodInformer
}

func (f podsFactory) Core() coreinformers.Interface {
	return podsCore{f.SharedInformerFactory.Core(), f.pods}
}

type podsCore struct {
	coreinformers.Interface
	pods corev1informers.TypedPodInformer
}

func (c podsCore) V1() corev1informers.Interface { return podsV1{c.Interface.V1(), c.pods} }

type podsV1 struct {
	corev1informers.Interface
	pods corev1informers.TypedPodInformer
}

func (v podsV1) Pods() corev1informers.TypedPodInformer { return v.pods }

// sourceInformer is a pod informer over a PodSource. The plugins use only its Lister; its
// Informer is always synced and holds nothing; it has no typed informer.
type sourceInformer struct{ src PodSource }

func (s sourceInformer) Informer() cache.SharedIndexInformer { return syncedInformer{} }
func (s sourceInformer) Lister() corev1listers.PodLister     { return podLister{src: s.src} }

func (s sourceInformer) TypedInformer() corev1informers.PodIndexInformer { return nil }

// syncedInformer answers HasSynced; the plugins call nothing else on the pod informer.
type syncedInformer struct{ cache.SharedIndexInformer }

func (syncedInformer) HasSynced() bool { return true }

type podLister struct {
	src       PodSource
	namespace string
}

func (l podLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	return l.src.ListPods(l.namespace, selector)
}

func (l podLister) Pods(namespace string) corev1listers.PodNamespaceLister {
	return podLister{src: l.src, namespace: namespace}
}

func (l podLister) Get(name string) (*corev1.Pod, error) { return l.src.GetPod(l.namespace, name) }
