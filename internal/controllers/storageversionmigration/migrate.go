package storageversionmigration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Condition reasons, upstream's.
const (
	reasonRunning   = "MigrationRunning"
	reasonSucceeded = "StorageVersionMigrationSucceeded"
	reasonFailed    = "StorageVersionMigrationFailed"
)

// migrator rewrites the objects of Running migrations.
type migrator struct {
	client   kubernetes.Interface
	dynamic  dynamic.Interface
	metadata metadata.Interface
	mapper   meta.RESTMapper
	lister   svmlisters.StorageVersionMigrationLister
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
}

func (m *migrator) handler() cache.ResourceEventHandler {
	add := func(obj any) {
		if s, ok := obj.(*svmv1.StorageVersionMigration); ok {
			m.queue.Add(s.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
}

func (m *migrator) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		m.queue.ShutDown()
	}()
	for {
		name, quit := m.queue.Get()
		if quit {
			return
		}
		err := m.sync(ctx, name)
		switch {
		case err == nil:
			m.queue.Forget(name)
		default:
			m.log.Info("storage version migration: retrying", "migration", name, "err", err)
			m.queue.AddRateLimited(name)
		}
		m.queue.Done(name)
	}
}

func (m *migrator) sync(ctx context.Context, name string) error {
	cur, err := m.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	svm := cur.DeepCopy()
	if !ready(svm) {
		return nil
	}
	gvr, ok, err := resourceFor(m.mapper, svm.Spec.Resource)
	if err != nil {
		return err
	}
	if !ok {
		if time.Since(svm.CreationTimestamp.Time) < time.Minute {
			if r, ok := m.mapper.(meta.ResettableRESTMapper); ok {
				r.Reset()
			}
			return fmt.Errorf("resource %s is not in discovery yet", svm.Spec.Resource.String())
		}
		return m.fail(ctx, svm, fmt.Errorf("unable to obtain GVR from discovery"), -1, 0)
	}
	gvk, err := m.mapper.KindFor(gvr)
	if err != nil {
		return m.fail(ctx, svm, err, -1, 0)
	}
	left, total, err := m.rewrite(ctx, gvr, gvk, svm.Status.ResourceVersion)
	switch {
	case err != nil && retryable(err):
		m.setRunning(svm, left, total, err)
		if _, uerr := m.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{}); uerr != nil {
			m.log.Info("storage version migration: status", "migration", name, "err", uerr)
		}
		return err
	case err != nil:
		return m.fail(ctx, svm, err, left, total)
	}
	m.setRunning(svm, 0, total, nil)
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationSucceeded),
		Status: metav1.ConditionTrue, Reason: reasonSucceeded, Message: "Migration completed"})
	_, err = m.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	if err == nil {
		m.log.Info("storage version migration succeeded", "migration", name, "resource", gvr.String(), "objects", total)
	}
	return err
}

// ready is a migration that upstream's runner marked Running, whose resourceVersion is set
// and which has not ended.
func ready(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationRunning)) &&
		svm.Status.ResourceVersion != "" &&
		!meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded)) &&
		!meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed))
}

// rewrite patches every object of gvr not newer than rv; it returns how many were left
// unrewritten and how many objects there were.
func (m *migrator) rewrite(ctx context.Context, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, rv string) (left, total int, err error) {
	limit, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return -1, 0, fmt.Errorf("status.resourceVersion %q: %w", rv, err)
	}
	var candidates []metav1.PartialObjectMetadata
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := m.metadata.Resource(gvr).List(ctx, opts)
		if err != nil {
			return -1, 0, fmt.Errorf("list %s: %w", gvr.String(), err)
		}
		for _, it := range list.Items {
			total++
			if v, err := strconv.ParseUint(it.ResourceVersion, 10, 64); err == nil && v <= limit {
				candidates = append(candidates, it)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	left = len(candidates)
	for _, it := range candidates {
		patch, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]string{"resourceVersion": it.ResourceVersion}})
		if err != nil {
			return left, total, err
		}
		_, err = m.dynamic.Resource(gvr).Namespace(it.Namespace).Patch(ctx, it.Name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: Name})
		// A conflict or NotFound: rewritten or deleted since the list — nothing to migrate.
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return left, total, fmt.Errorf("rewrite %s %s/%s: %w", gvr.Resource, it.Namespace, it.Name, err)
		}
		left--
	}
	return 0, total, nil
}

func (m *migrator) setRunning(svm *svmv1.StorageVersionMigration, left, total int, transient error) {
	msg := "The migration is running"
	switch {
	case total > 0 && left > 0:
		msg += fmt.Sprintf(", %d/%d objects not yet migrated", left, total)
	case total > 0:
		msg += fmt.Sprintf(", %d objects verified migrated", total)
	}
	if transient != nil {
		msg += "; transient error: " + transient.Error()
	}
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationRunning),
		Status: metav1.ConditionTrue, Reason: reasonRunning, Message: msg})
}

func (m *migrator) fail(ctx context.Context, svm *svmv1.StorageVersionMigration, cause error, left, total int) error {
	msg := "migration encountered unhandled error: " + cause.Error()
	if left >= 0 && total > 0 {
		m.setRunning(svm, left, total, nil)
		msg = fmt.Sprintf("%d/%d not yet migrated. %s", left, total, msg)
	}
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationFailed),
		Status: metav1.ConditionTrue, Reason: reasonFailed, Message: msg})
	_, err := m.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// resourceFor finds the served version of gr (false: not served).
func resourceFor(mapper meta.RESTMapper, gr metav1.GroupResource) (schema.GroupVersionResource, bool, error) {
	gvrs, err := mapper.ResourcesFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, false, nil
	}
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	for _, g := range gvrs {
		if g.Group == gr.Group && g.Resource == gr.Resource {
			return g, true, nil
		}
	}
	return schema.GroupVersionResource{}, false, nil
}

// retryable errors are the server's or the connection's, not the migration's.
func retryable(err error) bool {
	return utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || wait.Interrupted(err)
}
