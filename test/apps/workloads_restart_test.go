package apps

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// TestRolloutAcrossRestart runs client-go informers of pods and Deployments (the
// kubeconfig as kubectl uses it, client-go's defaults) while a Deployment of 20 replicas
// rolls out with maxSurge 2 and maxUnavailable 0 and the server restarts mid-rollout: the
// controllers come back with nothing in memory, rebuild their expectations from their
// caches and finish the rollout; the informers follow across the restart, and at no
// moment do the ReplicaSets ask for more pods than replicas + maxSurge nor are fewer
// than replicas Ready. (Live pods may briefly exceed replicas + maxSurge, as upstream's:
// the new ReplicaSet's controller may create a pod before the old one's has deleted the
// one its scale-down asked for.)
//
// Not parallel: the restart would disturb the other tests (Go runs it before them).
func TestRolloutAcrossRestart(t *testing.T) {
	appsSuite.Need(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, cs, "restart")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 5*time.Minute)
	const replicas, surge int32 = 20, 2

	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	pods := f.Core().V1().Pods().Informer()
	rss := f.Apps().V1().ReplicaSets().Informer()
	deps := f.Apps().V1().Deployments().Lister()
	var mu sync.Mutex
	tracking := false
	var most int32
	leastReady := replicas
	tally := func() {
		mu.Lock()
		defer mu.Unlock()
		if !tracking {
			return
		}
		var n, ready int32
		for _, o := range rss.GetStore().List() {
			n += *o.(*appsv1.ReplicaSet).Spec.Replicas
		}
		for _, o := range pods.GetStore().List() {
			if p := o.(*corev1.Pod); p.DeletionTimestamp == nil && podReady(p) {
				ready++
			}
		}
		most, leastReady = max(most, n), min(leastReady, ready)
	}
	for _, inf := range []cache.SharedIndexInformer{pods, rss} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { tally() },
			UpdateFunc: func(_, _ any) { tally() },
			DeleteFunc: func(any) { tally() },
		}); err != nil {
			t.Fatal(err)
		}
	}
	infCtx, stopInformers := context.WithCancel(ctx)
	f.Start(infCtx.Done())
	defer func() {
		stopInformers()
		f.Shutdown()
	}()
	f.WaitForCacheSync(ctx.Done())

	l := map[string]string{"app": "big"}
	tmpl := podTemplate(l)
	tmpl.Annotations = map[string]string{StartDelayAnnotation: "1s"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: l}, Template: tmpl,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(surge)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	complete := func(d *appsv1.Deployment) error {
		s := d.Status
		if s.ObservedGeneration != d.Generation || s.UpdatedReplicas != replicas || s.AvailableReplicas != replicas || s.Replicas != replicas {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	}
	cached := func() (*appsv1.Deployment, error) { return deps.Deployments(ns).Get("big") }
	eventually(t, 120*time.Second, func() error {
		d, err := cached()
		if err != nil {
			return err
		}
		return complete(d)
	})

	mu.Lock()
	tracking = true
	mu.Unlock()
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}}}}`
	patched, err := cs.AppsV1().Deployments(ns).Patch(ctx, "big", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, func() error {
		d, err := cached()
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < patched.Generation || d.Status.UpdatedReplicas < 4 {
			return fmt.Errorf("%d updated", d.Status.UpdatedReplicas)
		}
		return nil
	})
	if d, _ := cached(); complete(d) == nil {
		t.Fatal("the rollout finished before the restart; the test proves nothing")
	}
	mu.Lock()
	mostBefore := most
	mu.Unlock()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 180*time.Second, func() error {
		d, err := cached()
		if err != nil {
			return err
		}
		if err := complete(d); err != nil {
			return err
		}
		var live int32
		for _, o := range pods.GetStore().List() {
			p := o.(*corev1.Pod)
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == "registry.k8s.io/pause:3.10" && podReady(p) {
				live++
			} else if p.DeletionTimestamp == nil {
				return fmt.Errorf("old or unready pod %s remains", p.Name)
			}
		}
		if live != replicas {
			return fmt.Errorf("%d new ready pods", live)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if most > replicas+surge {
		t.Errorf("the ReplicaSets asked for %d pods at once (%d before the restart), maxSurge allows %d", most, mostBefore, replicas+surge)
	}
	if leastReady < replicas {
		t.Errorf("only %d pods Ready at one moment, maxUnavailable 0 wants %d", leastReady, replicas)
	}
	// The server's own list agrees with the informer's cache.
	list := podsOf(t, cs, ns, "app=big")
	if int32(live(list)) != replicas {
		t.Errorf("the server lists %d live pods, want %d", live(list), replicas)
	}
}
