package platform

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// A Volume with spec.restoreFrom {backup[, archive]} is filled from an archive of a Backup
// whose source is a Volume (a gzipped tar of its files, volume_backup.go):
//
//  1. Until the restore is done the Volume depends on the Backup (the engine's
//     DependenciesReady=False "waiting for Backup <ns>/<name>" while it is missing or not
//     Active); once restored the dependency goes, so the Backup may be deleted.
//  2. The claim is pre-bound: Provision creates it with volume.kubernetes.io/selected-node
//     set to a Ready, schedulable node with an agent (not simulated, no NoSchedule or
//     NoExecute taint), chosen by rendezvous hashing of <namespace>/<name> — what the
//     scheduler would write for the first consumer of a WaitForFirstConsumer claim — so the
//     local-path provisioner makes its directory and PersistentVolume at once, and the pods
//     that use it are then scheduled to that node by the PV's node affinity. The claim also
//     carries kubeos.dev/restoring=<backup>: the node agent refuses to mount it
//     (FailedMount, the pod waits in ContainerCreating), so no pod, not even one using the
//     claim directly, sees or writes the directory before the restore. A claim not bound yet
//     whose node can no longer hold it (gone, not Ready, cordoned, tainted) is deleted and
//     made again on another node (it holds no data yet).
//  3. Once the claim is bound, Update reads the archive (spec.restoreFrom.archive, else the
//     Backup's status.lastSuccessful) from the Backup's Bucket and unpacks it into the
//     directory through the node's agent (VolumeFiles.RestoreVolume), then records
//     status.restored {backup, archive, time}. A Backup with no successful archive yet
//     keeps the Volume Reconciling (reason BackupNotReady) until it has one; a Backup of
//     another kind is terminal (admission refuses it with 422 when it exists already).
//  4. The next Observe, seeing status.restored stored, removes the annotation; the Volume
//     is Active with reason Restored.
//
// Restore once: status.restored is the record. A Volume that has it is never restored again
// (a restart, a new archive of the Backup, a claim recreated behind the platform's back:
// none unpacks an archive over newer data). Between the unpack and the status write the
// annotation still holds pods back, so an unpack repeated after a lost status write lands
// on the same files only. restoreFrom is immutable (422); with perReplica it is refused
// (there is no one claim), and it needs a class of the local-path provisioner (its files
// are reached through the node's agent).

// volumeRestorer unpacks an archive into a Volume (VolumeFiles; a fake in unit tests).
type volumeRestorer interface {
	RestoreVolume(ctx context.Context, vol *v1alpha1.Volume, r io.Reader) error
}

// archiveOpener opens an archive of a Backup (openBackupArchive; a fake in unit tests).
type archiveOpener func(ctx context.Context, o Options, namespace, backup, archive string) (sourceKind string, rc io.ReadCloser, err error)

// restoreStep is what a Volume's restore needs next.
type restoreStep int

const (
	restoreNone      restoreStep = iota // no restoreFrom, or restored and released to pods
	restoreWaitClaim                    // the claim is not bound yet
	restoreRun                          // unpack the archive into the bound claim's volume
	restoreRelease                      // restored (status.restored stored): remove the claim's annotation
)

// decideRestore decides for v with its claim (nil: none yet). Pure.
func decideRestore(v *v1alpha1.Volume, pvc *corev1.PersistentVolumeClaim) restoreStep {
	if v.Status.Restored != nil {
		if pvc != nil && pvc.Annotations[v1alpha1.AnnotationRestoring] != "" {
			return restoreRelease
		}
		return restoreNone
	}
	if v.Spec.RestoreFrom == nil || v.Spec.PerReplica {
		return restoreNone
	}
	if pvc == nil || pvc.DeletionTimestamp != nil || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return restoreWaitClaim
	}
	return restoreRun
}

// restorePending reports whether v still has a restore to do (and so depends on its Backup).
func restorePending(v *v1alpha1.Volume) bool {
	return v.Spec.RestoreFrom != nil && v.Status.Restored == nil && !v.Spec.PerReplica
}

// volumeDependencies: the Backup of restoreFrom until the restore is done.
func volumeDependencies(v *v1alpha1.Volume) []lifecycle.Ref {
	if !restorePending(v) {
		return nil
	}
	return []lifecycle.Ref{{Kind: "Backup", Namespace: v.Namespace, Name: v.Spec.RestoreFrom.Backup}}
}

// simNodeAnnotation marks a simulated node (internal/simnode): no agent, no disk.
const simNodeAnnotation = "sim.kubeos.dev/node"

// restoreNode is the node for the claim of the Volume key (namespace/name): among the Ready,
// schedulable nodes with an agent (not simulated, without NoSchedule or NoExecute taints),
// the one with the highest rendezvous hash of key and its name, so that Volumes spread and
// the choice is stable. ok is false when none qualifies. Pure.
func restoreNode(nodes []corev1.Node, key string) (name string, ok bool) {
	var best uint64
	for i := range nodes {
		n := &nodes[i]
		if !restoreCandidate(n) {
			continue
		}
		h := fnv.New64a()
		_, _ = io.WriteString(h, key+"\x00"+n.Name)
		if s := h.Sum64(); !ok || s > best || (s == best && n.Name < name) {
			name, best, ok = n.Name, s, true
		}
	}
	return name, ok
}

// restoreCandidate reports whether n may hold a restored Volume. Pure.
func restoreCandidate(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil || n.Spec.Unschedulable || n.Annotations[simNodeAnnotation] != "" {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// localPathProvisioner is the provisioner of the local-path class (internal/controllers/localpath).
const localPathProvisioner = "kubeos.dev/local-path"

// restoreClaim is the claim of a Volume to restore: pre-bound to a node and held back from
// pods. out is non-nil for a wait or a terminal outcome.
func (d *volumeDriver) restoreClaim(ctx context.Context, v *v1alpha1.Volume) (*corev1.PersistentVolumeClaim, *lifecycle.Outcome, error) {
	class := VolumeStorageClass(v)
	provisioner, err := d.classProvisioner(ctx, class)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "StorageClassNotFound",
			Message: "waiting for StorageClass " + class, RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("read StorageClass %s: %w", class, err)
	case provisioner != localPathProvisioner:
		return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("restoreFrom needs a class of the local-path provisioner (%s): StorageClass %s is provisioned by %s",
			localPathProvisioner, class, provisioner), Reason: "RestoreNeedsLocalPath"}, nil
	}
	var nodes corev1.NodeList
	if err := d.o.Client.List(ctx, &nodes); err != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	node, ok := restoreNode(nodes.Items, v.Namespace+"/"+v.Name)
	if !ok {
		return nil, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "NoNodeForRestore",
			Message: "no Ready, schedulable node with an agent to hold the restored Volume", RequeueAfter: 15 * time.Second}, nil
	}
	pvc := desiredClaim(v)
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node, v1alpha1.AnnotationRestoring: v.Spec.RestoreFrom.Backup}
	return pvc, nil, nil
}

// classProvisioner reads the provisioner of StorageClass name.
func (d *volumeDriver) classProvisioner(ctx context.Context, name string) (string, error) {
	var sc storagev1.StorageClass
	if err := d.o.Client.Get(ctx, client.ObjectKey{Name: name}, &sc); err != nil {
		return "", err
	}
	return sc.Provisioner, nil
}

// restore unpacks the archive of v's restoreFrom into its (bound) claim's volume and records
// status.restored.
func (d *volumeDriver) restore(ctx context.Context, v *v1alpha1.Volume) (lifecycle.Outcome, error) {
	rf := v.Spec.RestoreFrom
	var b v1alpha1.Backup
	if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: v.Namespace, Name: rf.Backup}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return lifecycle.Outcome{Exists: true, Phase: lifecycle.PhaseReconciling, Reason: "BackupNotFound",
				Message: "waiting for Backup " + rf.Backup, RequeueAfter: 10 * time.Second}, nil
		}
		return lifecycle.Outcome{}, fmt.Errorf("read Backup %s: %w", rf.Backup, err)
	}
	if b.Spec.Source.Kind != "Volume" {
		return lifecycle.Outcome{Terminal: fmt.Errorf("restoreFrom: Backup %s backs up a %s; a Volume can only be restored from a Backup of a Volume",
			rf.Backup, b.Spec.Source.Kind), Reason: "BackupOfAnotherKind"}, nil
	}
	archive := rf.Archive
	if archive == "" {
		if b.Status.LastSuccessful == nil {
			msg := fmt.Sprintf("Backup %s has no successful archive yet", rf.Backup)
			if f := b.Status.LastFailure; f != nil {
				msg += fmt.Sprintf(" (its last run at %s failed: %s)", f.Time.UTC().Format(time.RFC3339), f.Error)
			}
			return lifecycle.Outcome{Exists: true, Phase: lifecycle.PhaseReconciling, Reason: "BackupNotReady", Message: msg,
				RequeueAfter: 15 * time.Second}, nil
		}
		archive = b.Status.LastSuccessful.Archive
	}
	if d.files == nil {
		return lifecycle.Outcome{Terminal: errors.New("restores of Volumes need the node agents, which this server cannot reach"), Reason: "NoAgents"}, nil
	}
	_, rc, err := d.openArchive(ctx, d.o, v.Namespace, rf.Backup, archive)
	if err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("restore from Backup %s: %w", rf.Backup, err)
	}
	defer rc.Close()
	start := d.o.Now()
	if err := d.files.RestoreVolume(ctx, v, rc); err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("restore from Backup %s (%s): %w", rf.Backup, archive, err)
	}
	v.Status.Restored = &v1alpha1.VolumeRestored{Backup: rf.Backup, Archive: archive, Time: metav1.Time{Time: start}}
	// Reconciling until the next pass, with status.restored stored, releases the claim to pods.
	return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "Restored",
		Message:      fmt.Sprintf("Backup %s (%s) unpacked in %s", rf.Backup, archive, d.o.Now().Sub(start).Round(time.Millisecond)),
		RequeueAfter: 100 * time.Millisecond}, nil
}

// release removes the annotation that holds pods back from pvc.
func (d *volumeDriver) release(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	patch := client.MergeFrom(pvc.DeepCopy())
	delete(pvc.Annotations, v1alpha1.AnnotationRestoring)
	if err := d.o.Client.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release claim %s to pods: %w", pvc.Name, err)
	}
	return nil
}

// restoredOutcome is the Active outcome of a restored Volume whose claim is bound. Pure.
func restoredOutcome(v *v1alpha1.Volume, bound lifecycle.Outcome) lifecycle.Outcome {
	r := v.Status.Restored
	bound.Reason = "Restored"
	bound.Message = fmt.Sprintf("restored from Backup %s (%s) at %s; %s", r.Backup, r.Archive, r.Time.UTC().Format(time.RFC3339), bound.Message)
	return bound
}

// waitRestoreClaim waits for the claim of a Volume to restore to bind; an unbound claim
// whose selected node can no longer hold it (gone, not Ready, cordoned, tainted) holds no
// data and is deleted, so that Provision pre-binds a new one to another node (as the
// scheduler drops its selected-node after a failed binding).
func (d *volumeDriver) waitRestoreClaim(ctx context.Context, v *v1alpha1.Volume, pvc *corev1.PersistentVolumeClaim) (lifecycle.Outcome, error) {
	node := pvc.Annotations["volume.kubernetes.io/selected-node"]
	if pvc.Spec.VolumeName != "" || node == "" {
		return restoreWaitOutcome(v, pvc), nil
	}
	var n corev1.Node
	err := d.o.Client.Get(ctx, client.ObjectKey{Name: node}, &n)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return lifecycle.Outcome{}, fmt.Errorf("read node %s: %w", node, err)
	case err == nil && restoreCandidate(&n):
		return restoreWaitOutcome(v, pvc), nil
	}
	if err := d.o.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) {
		return lifecycle.Outcome{}, fmt.Errorf("delete claim %s pre-bound to node %s: %w", pvc.Name, node, err)
	}
	return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: "NodeUnavailable",
		Message:      fmt.Sprintf("node %s can no longer hold claim %s (not bound yet): the claim is made again on another node", node, pvc.Name),
		RequeueAfter: time.Second}, nil
}

// restoreWaitOutcome is the outcome while the claim of a Volume to restore binds. Pure.
func restoreWaitOutcome(v *v1alpha1.Volume, pvc *corev1.PersistentVolumeClaim) lifecycle.Outcome {
	return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: "WaitingForClaim",
		Message: fmt.Sprintf("claim %s is provisioned on node %s; Backup %s is restored into it once it is bound", pvc.Name,
			cmp.Or(pvc.Annotations["volume.kubernetes.io/selected-node"], "(none selected)"), v.Spec.RestoreFrom.Backup),
		RequeueAfter: 2 * time.Second}
}

// mapBackup: a Backup concerns the Volumes waiting to be restored from it (its first
// successful archive wakes them).
func (d *volumeDriver) mapBackup(ctx context.Context, obj client.Object) []types.NamespacedName {
	var l v1alpha1.VolumeList
	if err := d.o.Client.List(ctx, &l, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []types.NamespacedName
	for i := range l.Items {
		if v := &l.Items[i]; restorePending(v) && v.Spec.RestoreFrom.Backup == obj.GetName() {
			out = append(out, types.NamespacedName{Namespace: v.Namespace, Name: v.Name})
		}
	}
	return out
}
