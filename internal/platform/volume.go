package platform

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// A Volume is a PersistentVolumeClaim <name>-volume of spec.storageClass (default
// local-path, the node agents' provisioner), spec.size and spec.accessMode, controlled by
// the Volume and labelled kubeos.dev/volume=<name>. Its status shows the claim, the bound
// PersistentVolume, the bound capacity, the class and the node holding a local volume.
//
//   - Active once the claim exists and is bound, or is waiting for its first consumer (a
//     WaitForFirstConsumer class binds when a Component's pod is scheduled, so the Volume
//     must not wait for that: the Component waits for the Volume).
//   - spec.size growing patches the claim's request (Reconciling "Resizing" until the
//     claim's capacity shows it); a claim not bound yet is recreated at the new size (it
//     holds no data); a shrink is refused by the validator (422).
//   - perReplica creates no claim: each Component using it turns it into a
//     volumeClaimTemplate of its StatefulSet.
//   - Deletion: deletionPolicy Retain (default) orphans the claim (its ownerReference is
//     removed: claim and data stay); Delete deletes the claim, and the local-path
//     provisioner then removes the directory and the PersistentVolume.
//   - restoreFrom fills the new Volume from a Backup of a Volume once, before it is Active
//     (volume_restore.go); it is immutable.

// registerVolume registers the Volume kind.
func registerVolume(e *lifecycle.Engine, o Options) error {
	d := newVolumeDriver(o)
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Volume]{Kind: "Volume", New: func() *v1alpha1.Volume { return &v1alpha1.Volume{} },
		Driver: d, MaxConcurrentReconciles: 4, Owns: []client.Object{&corev1.PersistentVolumeClaim{}},
		Dependencies: volumeDependencies, ReconcileTimeout: 30 * time.Minute, // a restore streams an archive
		Watches: []lifecycle.Watch{{Object: &v1alpha1.Backup{}, Map: d.mapBackup}}})
}

func newVolumeDriver(o Options) *volumeDriver {
	d := &volumeDriver{o: o, openArchive: openBackupArchive}
	if o.VolumeFiles != nil {
		d.files = o.VolumeFiles
	}
	return d
}

func init() { kindValidators["Volume"] = validateVolume }

// VolumeClaimName is the PersistentVolumeClaim of a (not perReplica) Volume.
func VolumeClaimName(volume string) string { return volume + "-volume" }

// volumeAccessModes are the access modes a Volume may ask for.
var volumeAccessModes = []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)}

// VolumeAccessMode is v's effective access mode (ReadWriteOnce by default).
func VolumeAccessMode(v *v1alpha1.Volume) corev1.PersistentVolumeAccessMode {
	if v.Spec.AccessMode == "" {
		return corev1.ReadWriteOnce
	}
	return corev1.PersistentVolumeAccessMode(v.Spec.AccessMode)
}

// VolumeStorageClass is v's effective class (local-path by default).
func VolumeStorageClass(v *v1alpha1.Volume) string {
	if v.Spec.StorageClass == "" {
		return v1alpha1.LocalPathClass
	}
	return v.Spec.StorageClass
}

// validateVolume refuses a shrink, a size that is not positive, an unknown access mode or
// deletion policy, a change of class, access mode, perReplica or restoreFrom, restoreFrom
// on a perReplica Volume and a restoreFrom naming an existing Backup of another kind.
func validateVolume(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	var v v1alpha1.Volume
	if err := decodeKind(obj, &v); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	var o *v1alpha1.Volume
	if old != nil {
		o = &v1alpha1.Volume{}
		if err := decodeKind(old, o); err != nil {
			o = nil
		}
	}
	errs := volumeSpecErrors(&v, o)
	if old == nil && v.Spec.RestoreFrom != nil {
		errs = append(errs, validateRestore(ctx, AdmissionContext(ctx), field.NewPath("spec", "restoreFrom"), v.Spec.RestoreFrom, "Volume")...)
	}
	return errs
}

// volumeSpecErrors is validateVolume on typed objects (old nil on create). Pure.
func volumeSpecErrors(v, old *v1alpha1.Volume) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if v.Spec.Size.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("size"), v.Spec.Size.String(), "must be greater than zero"))
	}
	if m := v.Spec.AccessMode; m != "" && !contains(volumeAccessModes, m) {
		errs = append(errs, field.NotSupported(p.Child("accessMode"), m, volumeAccessModes))
	}
	if dp := v.Spec.DeletionPolicy; dp != "" && dp != v1alpha1.DeletionRetain && dp != v1alpha1.DeletionDelete {
		errs = append(errs, field.NotSupported(p.Child("deletionPolicy"), dp, []string{v1alpha1.DeletionRetain, v1alpha1.DeletionDelete}))
	}
	if rf := v.Spec.RestoreFrom; rf != nil {
		if rf.Backup == "" {
			errs = append(errs, field.Required(p.Child("restoreFrom", "backup"), "names the Backup (of a Volume) to restore from"))
		}
		if v.Spec.PerReplica {
			errs = append(errs, field.Forbidden(p.Child("restoreFrom"), "a perReplica Volume has no one claim to restore into"))
		}
	}
	if old == nil {
		return errs
	}
	if !ptr.Equal(v.Spec.RestoreFrom, old.Spec.RestoreFrom) {
		errs = append(errs, field.Forbidden(p.Child("restoreFrom"), "is immutable (a Volume is restored once, when it is created)"))
	}
	if v.Spec.Size.Cmp(old.Spec.Size) < 0 {
		errs = append(errs, field.Forbidden(p.Child("size"), fmt.Sprintf("a Volume cannot shrink (from %s to %s)", old.Spec.Size.String(), v.Spec.Size.String())))
	}
	if VolumeStorageClass(v) != VolumeStorageClass(old) {
		errs = append(errs, field.Forbidden(p.Child("storageClass"), "is immutable"))
	}
	if VolumeAccessMode(v) != VolumeAccessMode(old) {
		errs = append(errs, field.Forbidden(p.Child("accessMode"), "is immutable"))
	}
	if v.Spec.PerReplica != old.Spec.PerReplica {
		errs = append(errs, field.Forbidden(p.Child("perReplica"), "is immutable"))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type volumeDriver struct {
	o Options
	// files unpacks restores (nil: this server cannot reach the agents); openArchive reads
	// a Backup's archive.
	files       volumeRestorer
	openArchive archiveOpener
}

var _ lifecycle.Driver[*v1alpha1.Volume] = (*volumeDriver)(nil)

// claim reads v's claim: nil when absent; a terminal outcome when the name is taken by a
// claim v does not control.
func (d *volumeDriver) claim(ctx context.Context, v *v1alpha1.Volume) (*corev1.PersistentVolumeClaim, *lifecycle.Outcome, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: v.Namespace, Name: VolumeClaimName(v.Name)}, &pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("read claim %s: %w", VolumeClaimName(v.Name), err)
	}
	if ref := metav1.GetControllerOf(&pvc); ref == nil || ref.UID != v.UID {
		return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("persistentvolumeclaim %s exists and is not controlled by this Volume", pvc.Name), Reason: "ClaimConflict"}, nil
	}
	return &pvc, nil, nil
}

// volumeClaimState is what Observe concludes from the claim. Pure.
type volumeClaimState struct {
	upToDate bool
	recreate bool // unbound at another size: delete it, Provision makes it again
	outcome  lifecycle.Outcome
}

func observeClaim(v *v1alpha1.Volume, pvc *corev1.PersistentVolumeClaim) volumeClaimState {
	want := v.Spec.Size
	req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	bound := pvc.Status.Phase == corev1.ClaimBound
	if pvc.DeletionTimestamp != nil {
		return volumeClaimState{upToDate: true, outcome: lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling,
			Reason: "ClaimDeleting", Message: "claim " + pvc.Name + " is being deleted", RequeueAfter: 2 * time.Second}}
	}
	if !bound {
		if req.Cmp(want) != 0 {
			return volumeClaimState{recreate: true}
		}
		return volumeClaimState{upToDate: true, outcome: lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "WaitingForFirstConsumer",
			Message: fmt.Sprintf("claim %s (%s) binds when a pod using it is scheduled", pvc.Name, ptr.Deref(pvc.Spec.StorageClassName, ""))}}
	}
	if req.Cmp(want) < 0 {
		return volumeClaimState{}
	}
	capacity := pvc.Status.Capacity[corev1.ResourceStorage]
	if capacity.Cmp(want) < 0 {
		return volumeClaimState{upToDate: true, outcome: lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling,
			Reason: "Resizing", Message: fmt.Sprintf("claim %s: %s of %s", pvc.Name, capacity.String(), want.String()), RequeueAfter: 5 * time.Second}}
	}
	return volumeClaimState{upToDate: true, outcome: lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "Bound",
		Message: fmt.Sprintf("claim %s bound to %s (%s)", pvc.Name, pvc.Spec.VolumeName, capacity.String())}}
}

func (d *volumeDriver) Observe(ctx context.Context, v *v1alpha1.Volume) (lifecycle.Outcome, error) {
	v.Status.StorageClass = VolumeStorageClass(v)
	if v.Spec.PerReplica {
		v.Status.ClaimName, v.Status.VolumeName, v.Status.Capacity, v.Status.Node = "", "", nil, ""
		return lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "PerReplica",
			Message: "each replica of a Component using this Volume gets its own claim (a volumeClaimTemplate)"}, nil
	}
	pvc, out, err := d.claim(ctx, v)
	if out != nil || err != nil {
		return ptr.Deref(out, lifecycle.Outcome{}), err
	}
	if pvc == nil {
		return lifecycle.Outcome{}, nil
	}
	if err := d.writeStatus(ctx, v, pvc); err != nil {
		return lifecycle.Outcome{}, err
	}
	st := observeClaim(v, pvc)
	if st.recreate {
		if err := d.o.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, fmt.Errorf("recreate unbound claim %s at the new size: %w", pvc.Name, err)
		}
		return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: "Resizing",
			Message: "the unbound claim is recreated at " + v.Spec.Size.String(), RequeueAfter: time.Second}, nil
	}
	switch decideRestore(v, pvc) {
	case restoreWaitClaim:
		if pvc.DeletionTimestamp == nil {
			return d.waitRestoreClaim(ctx, v, pvc)
		}
	case restoreRun:
		return lifecycle.Outcome{Exists: true}, nil // Update restores
	case restoreRelease:
		if err := d.release(ctx, pvc); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	if !st.upToDate {
		return lifecycle.Outcome{Exists: true}, nil
	}
	if v.Status.Restored != nil && st.outcome.Phase == "" && st.outcome.Reason == "Bound" {
		return restoredOutcome(v, st.outcome), nil
	}
	return st.outcome, nil
}

// writeStatus copies the claim's binding into v's status.
func (d *volumeDriver) writeStatus(ctx context.Context, v *v1alpha1.Volume, pvc *corev1.PersistentVolumeClaim) error {
	v.Status.ClaimName, v.Status.VolumeName = pvc.Name, pvc.Spec.VolumeName
	v.Status.Capacity = nil
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		v.Status.Capacity = &q
	}
	v.Status.Node = pvc.Annotations["volume.kubernetes.io/selected-node"]
	if pvc.Spec.VolumeName == "" {
		return nil
	}
	var pv corev1.PersistentVolume
	if err := d.o.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read persistentvolume %s: %w", pvc.Spec.VolumeName, err)
	}
	if n := PersistentVolumeNode(&pv); n != "" {
		v.Status.Node = n
	}
	return nil
}

// PersistentVolumeNode is the node a local PV lives on ("" for a network volume): the
// local-path provisioner's kubeos.dev/local-path-node annotation, else a required node
// affinity on one kubernetes.io/hostname.
func PersistentVolumeNode(pv *corev1.PersistentVolume) string {
	if n := pv.Annotations["kubeos.dev/local-path-node"]; n != "" {
		return n
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) == 1 {
		for _, e := range a.Required.NodeSelectorTerms[0].MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// VolumeClaimSpec is the claim spec of v: its access mode, class and size. A Component
// turns a perReplica Volume into a volumeClaimTemplate of this spec (named after the
// Volume). Pure.
func VolumeClaimSpec(v *v1alpha1.Volume) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{VolumeAccessMode(v)},
		StorageClassName: ptr.To(VolumeStorageClass(v)),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: v.Spec.Size}},
	}
}

// desiredClaim is v's claim. Pure.
func desiredClaim(v *v1alpha1.Volume) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: VolumeClaimName(v.Name), OwnerReferences: ownerRef(v, "Volume"),
			Labels: map[string]string{"kubeos.dev/volume": v.Name, "app.kubernetes.io/managed-by": "kube"}},
		Spec: VolumeClaimSpec(v),
	}
}

func (d *volumeDriver) Provision(ctx context.Context, v *v1alpha1.Volume) (lifecycle.Outcome, error) {
	pvc := desiredClaim(v)
	if restorePending(v) {
		var out *lifecycle.Outcome
		var err error
		if pvc, out, err = d.restoreClaim(ctx, v); out != nil || err != nil {
			return ptr.Deref(out, lifecycle.Outcome{}), err
		}
	}
	if err := d.o.Client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return lifecycle.Outcome{}, fmt.Errorf("create claim %s: %w", pvc.Name, err)
	}
	v.Status.ClaimName, v.Status.StorageClass = pvc.Name, VolumeStorageClass(v)
	if restorePending(v) {
		return restoreWaitOutcome(v, pvc), nil
	}
	return lifecycle.Outcome{Reason: "ClaimCreated", Message: fmt.Sprintf("claim %s of %s (%s)", pvc.Name, v.Spec.Size.String(), VolumeStorageClass(v)),
		Requeue: true}, nil
}

// Update grows the bound claim's request to spec.size.
func (d *volumeDriver) Update(ctx context.Context, v *v1alpha1.Volume) (lifecycle.Outcome, error) {
	pvc, out, err := d.claim(ctx, v)
	if out != nil || err != nil || pvc == nil {
		return ptr.Deref(out, lifecycle.Outcome{Requeue: true}), err
	}
	if decideRestore(v, pvc) == restoreRun {
		return d.restore(ctx, v)
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if pvc.Spec.Resources.Requests == nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{}
	}
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = v.Spec.Size
	if err := d.o.Client.Patch(ctx, pvc, patch); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return lifecycle.Outcome{Terminal: fmt.Errorf("expand claim %s: %w", pvc.Name, err), Reason: "ExpansionRefused"}, nil
		}
		return lifecycle.Outcome{}, fmt.Errorf("expand claim %s: %w", pvc.Name, err)
	}
	return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "Resizing", Message: fmt.Sprintf("claim %s asked for %s", pvc.Name, v.Spec.Size.String()),
		RequeueAfter: 2 * time.Second}, nil
}

// Deprovision orphans (Retain) or deletes (Delete) the claim.
func (d *volumeDriver) Deprovision(ctx context.Context, v *v1alpha1.Volume) (lifecycle.Outcome, error) {
	if v.Spec.PerReplica {
		return lifecycle.Outcome{Reason: "PerReplica", Message: "per-replica claims belong to the StatefulSets"}, nil
	}
	pvc, out, err := d.claim(ctx, v)
	if out != nil {
		return lifecycle.Outcome{Reason: "ClaimNotOwned", Message: out.Terminal.Error()}, nil // not ours: leave it
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if pvc == nil {
		return lifecycle.Outcome{Reason: "ClaimDeleted"}, nil
	}
	if deletionPolicy(v.Spec.DeletionPolicy) == v1alpha1.DeletionRetain {
		patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		pvc.OwnerReferences = orphaned(pvc.OwnerReferences, v.UID)
		if err := d.o.Client.Patch(ctx, pvc, patch); err != nil {
			return lifecycle.Outcome{}, fmt.Errorf("orphan claim %s: %w", pvc.Name, err)
		}
		return lifecycle.Outcome{Reason: "ClaimRetained", Message: fmt.Sprintf("deletionPolicy Retain: claim %s and its data are kept", pvc.Name)}, nil
	}
	if pvc.DeletionTimestamp == nil {
		if err := d.o.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, fmt.Errorf("delete claim %s: %w", pvc.Name, err)
		}
	}
	return lifecycle.Outcome{Reason: "ClaimDeleting", Message: fmt.Sprintf("deletionPolicy Delete: claim %s deleted (its volume goes once no pod uses it)", pvc.Name)}, nil
}

// orphaned is refs without the one of uid. Pure.
func orphaned(refs []metav1.OwnerReference, uid types.UID) []metav1.OwnerReference {
	out := refs[:0:0]
	for _, r := range refs {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	return out
}
