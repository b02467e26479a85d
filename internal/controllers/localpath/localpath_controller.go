package localpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"kubeos.dev/kube/internal/controllers/recorder"
)

// Name is the controller's name: identity system:kube-controller:<Name>, Lease
// kube-system/kube-<Name>.
const Name = "local-path-provisioner"

// Options configure the provisioner; zero values take the defaults.
type Options struct {
	// Workers reconcile in parallel (default 2).
	Workers int
	// Agents reach the node agents (default: through nodes/proxy with the controller's
	// client).
	Agents Agents
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

// Controller is the provisioner. See the package documentation.
type Controller struct {
	cfg    *rest.Config
	client kubernetes.Interface
	o      Options
}

// New prepares the provisioner on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("local-path: %w", err)
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Agents == nil {
		o.Agents = proxyAgents{client: cs}
	}
	return &Controller{cfg: cfg, client: cs, o: o}, nil
}

// key is a queued object: a claim (namespace set) or a volume.
type key struct{ namespace, name string }

// run is one leadership term's state.
type run struct {
	c       *Controller
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	nodes   corelisters.NodeLister
	queue   workqueue.TypedRateLimitingInterface[key]
	events  events.EventRecorder
}

// Start ensures the StorageClass and runs the provisioner until ctx ends; it can be called
// again (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	if err := c.ensureClass(ctx); err != nil {
		return err
	}
	rec, err := recorder.Start(ctx, c.cfg, Name)
	if err != nil {
		return err
	}
	defer rec.Stop()
	f := informers.NewSharedInformerFactory(c.client, 10*time.Minute)
	r := &run{c: c, claims: f.Core().V1().PersistentVolumeClaims().Lister(), volumes: f.Core().V1().PersistentVolumes().Lister(),
		classes: f.Storage().V1().StorageClasses().Lister(), nodes: f.Core().V1().Nodes().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[key](200*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: Name}),
		events: rec}
	defer r.queue.ShutDown()
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			r.queue.Add(key{o.Namespace, o.Name})
		case *corev1.PersistentVolume:
			r.queue.Add(key{"", o.Name})
			if ref := o.Spec.ClaimRef; ref != nil {
				r.queue.Add(key{ref.Namespace, ref.Name})
			}
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}
	if _, err := f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(h); err != nil {
		return err
	}
	if _, err := f.Core().V1().PersistentVolumes().Informer().AddEventHandler(h); err != nil {
		return err
	}
	f.Core().V1().Nodes().Informer()
	f.Storage().V1().StorageClasses().Informer()
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("local-path: %v informer did not sync", typ)
		}
	}
	var wg sync.WaitGroup
	for range c.o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
	return nil
}

// ensureClass creates the local-path StorageClass when it is missing.
func (c *Controller) ensureClass(ctx context.Context) error {
	list, err := c.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("local-path: list storage classes: %w", err)
	}
	existing := make([]*storagev1.StorageClass, len(list.Items))
	for i := range list.Items {
		existing[i] = &list.Items[i]
	}
	sc := defaultClass(existing)
	if sc == nil {
		return nil
	}
	if _, err := c.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("local-path: create storage class: %w", err)
	}
	c.o.Log.Info("storage class created", "class", sc.Name, "default", sc.Annotations[annDefaultClass] == "true")
	return nil
}

func (r *run) next(ctx context.Context) bool {
	k, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(k)
	var err error
	if k.namespace != "" {
		err = r.syncClaim(ctx, k)
	} else {
		err = r.syncVolume(ctx, k.name)
	}
	if err != nil && ctx.Err() == nil {
		r.c.o.Log.Info("retrying", "object", k.namespace+"/"+k.name, "err", err)
		r.queue.AddRateLimited(k)
		return true
	}
	r.queue.Forget(k)
	return true
}

func (r *run) syncClaim(ctx context.Context, k key) error {
	claim, err := r.claims.PersistentVolumeClaims(k.namespace).Get(k.name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	var class *storagev1.StorageClass
	if n := claim.Spec.StorageClassName; n != nil && *n != "" {
		class, _ = r.classes.Get(*n)
	}
	pvName := claim.Spec.VolumeName
	if pvName == "" {
		pvName = volumeName(claim)
	}
	pv, err := r.volumes.Get(pvName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	act, _ := decideClaim(claim, class, pv)
	switch act {
	case claimProvision:
		return r.provision(ctx, claim, class)
	case claimExpandPV:
		pv = pv.DeepCopy()
		pv.Spec.Capacity[corev1.ResourceStorage] = claimSize(claim)
		if _, err := r.c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("expand %s: %w", pv.Name, err)
		}
		size := claimSize(claim)
		r.c.o.Log.Info("volume expanded", "pv", pv.Name, "size", size.String())
	case claimExpandStatus:
		claim = claim.DeepCopy()
		size := pv.Spec.Capacity[corev1.ResourceStorage]
		if claim.Status.Capacity == nil {
			claim.Status.Capacity = corev1.ResourceList{}
		}
		claim.Status.Capacity[corev1.ResourceStorage] = size
		if claim.Status.AllocatedResources != nil {
			claim.Status.AllocatedResources[corev1.ResourceStorage] = size
		}
		claim.Status.AllocatedResourceStatuses = nil
		claim.Status.Conditions = slices.DeleteFunc(claim.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
			return c.Type == corev1.PersistentVolumeClaimResizing || c.Type == corev1.PersistentVolumeClaimFileSystemResizePending
		})
		if _, err := r.c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("record the expansion of %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		r.events.Eventf(claim, nil, corev1.EventTypeNormal, "VolumeResizeSuccessful", "Resize", "%s is now %s (local directories are not size-limited)", pv.Name, size.String())
	}
	return nil
}

// provision makes the directory on the selected node and the PV.
func (r *run) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	nodeName := claim.Annotations[annSelectedNode]
	node, err := r.nodes.Get(nodeName)
	if err != nil {
		r.events.Eventf(claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", "selected node %s: %v", nodeName, err)
		return fmt.Errorf("selected node %s: %w", nodeName, err)
	}
	pvName := volumeName(claim)
	dir := simulatedPath(pvName)
	if !simulated(node) {
		if dir, err = r.c.o.Agents.Create(ctx, nodeName, pvName); err != nil {
			r.events.Eventf(claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", "%v", err)
			return err
		}
	}
	pv := newVolume(claim, class, node, dir)
	if _, err := r.c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", pvName, err)
	}
	r.events.Eventf(claim, nil, corev1.EventTypeNormal, "ProvisioningSucceeded", "Provision", "Successfully provisioned volume %s at %s on node %s", pvName, dir, nodeName)
	r.c.o.Log.Info("volume provisioned", "claim", claim.Namespace+"/"+claim.Name, "pv", pvName, "node", nodeName, "path", dir)
	return nil
}

func (r *run) syncVolume(ctx context.Context, name string) error {
	pv, err := r.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	switch decideVolume(pv) {
	case volumeCleanup:
		nodeName := volumeNode(pv)
		node, err := r.nodes.Get(nodeName)
		switch {
		case apierrors.IsNotFound(err) || nodeName == "":
			r.events.Eventf(pv, nil, corev1.EventTypeWarning, "VolumeLeaked", "Delete", "node %q is gone: directory %s cannot be removed", nodeName, localPath(pv))
		case err != nil:
			return err
		case !simulated(node):
			if err := r.c.o.Agents.Remove(ctx, nodeName, pv.Name); err != nil {
				r.events.Eventf(pv, nil, corev1.EventTypeWarning, "VolumeFailedDelete", "Delete", "%v", err)
				return err
			}
		}
		if err := r.dropFinalizer(ctx, pv); err != nil {
			return err
		}
		if pv.DeletionTimestamp == nil {
			err := r.c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("delete %s: %w", pv.Name, err)
			}
		}
		r.c.o.Log.Info("volume deleted", "pv", pv.Name, "node", nodeName)
	case volumeDropFinalizer:
		return r.dropFinalizer(ctx, pv)
	}
	return nil
}

func (r *run) dropFinalizer(ctx context.Context, pv *corev1.PersistentVolume) error {
	for {
		cur, err := r.c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if !hasFinalizer(cur) {
			return nil
		}
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == Finalizer })
		_, err = r.c.client.CoreV1().PersistentVolumes().Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("remove the finalizer of %s: %w", pv.Name, err)
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
	}
}

func localPath(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	}
	return ""
}
