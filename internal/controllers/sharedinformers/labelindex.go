package sharedinformers

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// LabelIndex is the name of the index LabelIndexedPods and LabelIndexedEndpointSlices add
// to their informer: one key per label of each object, "<namespace>/<key>=<value>".
const LabelIndex = "kube.label"

// labelIndexFunc is the LabelIndex of an object.
func labelIndexFunc(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	ls := m.GetLabels()
	if len(ls) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(ls))
	for k, v := range ls {
		keys = append(keys, labelKey(m.GetNamespace(), k, v))
	}
	return keys, nil
}

func labelKey(namespace, k, v string) string { return namespace + "/" + k + "=" + v }

// indexKeys are the LabelIndex keys whose objects hold every object of namespace that sel
// can match: those of one requirement of sel that names values (=, == or in), preferring
// one that is not a manager's label; false when sel has none, and the whole namespace must
// be read.
func indexKeys(namespace string, sel labels.Selector) ([]string, bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, false
	}
	var best *labels.Requirement
	for i, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if best == nil || managerLabel(best.Key()) && !managerLabel(r.Key()) {
				best = &reqs[i]
			}
		}
	}
	if best == nil {
		return nil, false
	}
	vals := best.ValuesUnsorted()
	keys := make([]string, len(vals))
	for i, v := range vals {
		keys[i] = labelKey(namespace, best.Key(), v)
	}
	return keys, true
}

// managerLabel says whether a label key names the manager of an object
// (endpointslice.kubernetes.io/managed-by, app.kubernetes.io/managed-by): every object the
// manager made has the same value, so narrowing by it reads them all. The endpointslice
// controller's selector of a Service's slices sorts its managed-by requirement first.
func managerLabel(key string) bool {
	return key == "managed-by" || strings.HasSuffix(key, "/managed-by")
}

// listByLabels lists the objects of namespace that sel matches through the LabelIndex: the
// objects under the keys of one requirement, each checked against the whole selector; scan
// (the informer's own lister) when the index cannot narrow sel.
func listByLabels[T interface{ GetLabels() map[string]string }](indexer cache.Indexer, namespace string, sel labels.Selector, scan func(labels.Selector) ([]T, error)) ([]T, error) {
	keys, ok := indexKeys(namespace, sel)
	if !ok {
		return scan(sel)
	}
	var out []T
	for _, key := range keys {
		objs, err := indexer.ByIndex(LabelIndex, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if t, ok := o.(T); ok && sel.Matches(labels.Set(t.GetLabels())) {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// LabelIndexedPods is pods with a lister whose namespaced List of a selector with an
// equality (or set) requirement reads the pods under that label instead of every pod of
// the namespace. Upstream's controllers list a Service's or a PodDisruptionBudget's pods
// that way on every sync (the endpointslice controller once per Service change): with
// 100,000 pods in a namespace a scan is ~10 ms of label matching per sync, which made 10,000
// Services take minutes to get their slices. The answers are the same objects; the order of
// an unordered list may differ. The index is added to the (shared) informer.
func LabelIndexedPods(pods coreinformers.PodInformer) (coreinformers.PodInformer, error) {
	if err := addLabelIndex(pods.Informer()); err != nil {
		return nil, err
	}
	return labelIndexedPods{pods}, nil
}

// addLabelIndex adds LabelIndex to inf unless it has it already (a shared informer another
// controller indexed, or the same controller's earlier leadership term).
func addLabelIndex(inf cache.SharedIndexInformer) error {
	has := func() bool { _, ok := inf.GetIndexer().GetIndexers()[LabelIndex]; return ok }
	if has() {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{LabelIndex: labelIndexFunc}); err != nil && !has() {
		return err // not another controller adding it at the same moment
	}
	return nil
}

type labelIndexedPods struct{ coreinformers.PodInformer }

func (p labelIndexedPods) Lister() corelisters.PodLister {
	return podLister{PodLister: p.PodInformer.Lister(), indexer: p.Informer().GetIndexer()}
}

type podLister struct {
	corelisters.PodLister
	indexer cache.Indexer
}

func (l podLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return podNamespaceLister{PodNamespaceLister: l.PodLister.Pods(namespace), indexer: l.indexer, namespace: namespace}
}

type podNamespaceLister struct {
	corelisters.PodNamespaceLister
	indexer   cache.Indexer
	namespace string
}

func (l podNamespaceLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	return listByLabels(l.indexer, l.namespace, sel, l.PodNamespaceLister.List)
}

// LabelIndexedEndpointSlices is LabelIndexedPods for EndpointSlices: the endpointslice
// controller lists a Service's slices by its kubernetes.io/service-name label on every sync.
func LabelIndexedEndpointSlices(slices discoveryinformers.EndpointSliceInformer) (discoveryinformers.EndpointSliceInformer, error) {
	if err := addLabelIndex(slices.Informer()); err != nil {
		return nil, err
	}
	return labelIndexedSlices{slices}, nil
}

type labelIndexedSlices struct {
	discoveryinformers.EndpointSliceInformer
}

func (s labelIndexedSlices) Lister() discoverylisters.EndpointSliceLister {
	return sliceLister{EndpointSliceLister: s.EndpointSliceInformer.Lister(), indexer: s.Informer().GetIndexer()}
}

type sliceLister struct {
	discoverylisters.EndpointSliceLister
	indexer cache.Indexer
}

func (l sliceLister) EndpointSlices(namespace string) discoverylisters.EndpointSliceNamespaceLister {
	return sliceNamespaceLister{EndpointSliceNamespaceLister: l.EndpointSliceLister.EndpointSlices(namespace), indexer: l.indexer, namespace: namespace}
}

type sliceNamespaceLister struct {
	discoverylisters.EndpointSliceNamespaceLister
	indexer   cache.Indexer
	namespace string
}

func (l sliceNamespaceLister) List(sel labels.Selector) ([]*discoveryv1.EndpointSlice, error) {
	return listByLabels(l.indexer, l.namespace, sel, l.EndpointSliceNamespaceLister.List)
}
