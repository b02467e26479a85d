package main

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// kind is a resource the oracle watches and snapshots.
type kind struct {
	name       string // Kind, as printed
	gvr        schema.GroupVersionResource
	namespaced bool
}

var (
	kPod       = kind{"Pod", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true}
	kRS        = kind{"ReplicaSet", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, true}
	kDeploy    = kind{"Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true}
	kSTS       = kind{"StatefulSet", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, true}
	kCR        = kind{"ControllerRevision", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}, true}
	kDS        = kind{"DaemonSet", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, true}
	kJob       = kind{"Job", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true}
	kCronJob   = kind{"CronJob", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, true}
	kSlice     = kind{"EndpointSlice", schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, true}
	kEndpoints = kind{"Endpoints", schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, true}
	kService   = kind{"Service", schema.GroupVersionResource{Version: "v1", Resource: "services"}, true}
	kPDB       = kind{"PodDisruptionBudget", schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, true}
	kEvent     = kind{"Event", schema.GroupVersionResource{Version: "v1", Resource: "events"}, true}
	kConfigMap = kind{"ConfigMap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true}
	kSA        = kind{"ServiceAccount", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true}
	kQuota     = kind{"ResourceQuota", schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, true}
	kNode      = kind{"Node", schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, false}
	kRC        = kind{"ReplicationController", schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, true}
	kNamespace = kind{"Namespace", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false}
	kPV        = kind{"PersistentVolume", schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, false}
	kPVC       = kind{"PersistentVolumeClaim", schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, true}
	kHPA       = kind{"HorizontalPodAutoscaler", schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, true}
)

// rec is one watch event as the client saw it.
type rec struct {
	kind string
	typ  watch.EventType
	obj  *unstructured.Unstructured
}

// recorder keeps the watch streams of one scenario's kinds on one side. Each kind's stream
// is in the server's order; streams of different kinds interleave as they arrived.
type recorder struct {
	mu   sync.Mutex
	recs []rec
	wg   sync.WaitGroup
}

// record starts watching kinds in ns (cluster-scoped kinds: everywhere, filtered by keep)
// and returns once every watch has begun.
func record(ctx context.Context, s *side, ns string, kinds []kind, keep func(k string, o *unstructured.Unstructured) bool) (*recorder, error) {
	r := &recorder{}
	for _, k := range kinds {
		ri := s.dyn.Resource(k.gvr)
		var nri interface {
			List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error)
			Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
		} = ri
		if k.namespaced {
			nri = ri.Namespace(ns)
		}
		l, err := nri.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", s.name, k.gvr.Resource, err)
		}
		for i := range l.Items {
			if keep == nil || keep(k.name, &l.Items[i]) {
				r.add(rec{k.name, watch.Added, &l.Items[i]})
			}
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, l.GetResourceVersion(), &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return nri.Watch(ctx, o)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%s: watch %s: %w", s.name, k.gvr.Resource, err)
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok || (keep != nil && !keep(k.name, u)) {
						continue
					}
					r.add(rec{k.name, ev.Type, u})
				}
			}
		}()
	}
	return r, nil
}

func (r *recorder) add(x rec) {
	r.mu.Lock()
	r.recs = append(r.recs, x)
	r.mu.Unlock()
}

// snapshot returns the events recorded so far.
func (r *recorder) snapshot() []rec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rec(nil), r.recs...)
}
