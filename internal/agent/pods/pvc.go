package pods

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// claimPath resolves a persistentVolumeClaim volume of pod to its directory on this node:
// claim → bound PV → spec.local or spec.hostPath, made (0777, as local-path-provisioner
// does) when missing. A missing, unbound or restoring claim, a PV of another node or of a type the
// agent cannot mount is a mountError (FailedMount; the pod waits in ContainerCreating).
func (m *Manager) claimPath(ctx context.Context, pod *corev1.Pod, v corev1.Volume) (string, error) {
	name := v.PersistentVolumeClaim.ClaimName
	claim, err := m.opts.Client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : persistentvolumeclaim %q not found", v.Name, name)}
	} else if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %s: %w", name, err)
	}
	if err := claimBound(claim); err != nil {
		return "", mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)}
	}
	pv, err := m.opts.Client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : persistentvolume %q: %w", v.Name, claim.Spec.VolumeName, err)}
	}
	node, err := m.opts.Client.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", m.opts.NodeName, err)
	}
	dir, err := volumePath(claim, pv, node)
	if err != nil {
		return "", mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)}
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm() != 0o777 && pv.Spec.Local != nil {
		_ = os.Chmod(dir, 0o777)
	}
	return dir, nil
}

// annRestoring (v1alpha1.AnnotationRestoring) is on the claim of a Volume whose
// restoreFrom is not unpacked into it yet: no pod may use it until it goes.
const annRestoring = "kubeos.dev/restoring"

// claimBound refuses a claim that is not bound to a volume, or is held back while its
// Volume is restored from a Backup. Pure.
func claimBound(claim *corev1.PersistentVolumeClaim) error {
	if claim.DeletionTimestamp != nil {
		return fmt.Errorf("persistentvolumeclaim %q is being deleted", claim.Name)
	}
	if b := claim.Annotations[annRestoring]; b != "" {
		return fmt.Errorf("persistentvolumeclaim %q is being restored from Backup %q: pods may use it once the restore is done", claim.Name, b)
	}
	if claim.Spec.VolumeName == "" || claim.Status.Phase != corev1.ClaimBound {
		return fmt.Errorf("persistentvolumeclaim %q is not bound", claim.Name)
	}
	return nil
}

// volumePath is the directory of pv for claim on node: the PV must be bound to the claim,
// its node affinity must admit node and it must be a local or hostPath volume. Pure.
func volumePath(claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, node *corev1.Node) (string, error) {
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name || (ref.UID != "" && ref.UID != claim.UID) {
		return "", fmt.Errorf("persistentvolume %q is not bound to claim %q", pv.Name, claim.Name)
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		ok, err := nodeaffinity.NewLazyErrorNodeSelector(a.Required).Match(node)
		if err != nil {
			return "", fmt.Errorf("persistentvolume %q: node affinity: %w", pv.Name, err)
		}
		if !ok {
			return "", fmt.Errorf("persistentvolume %q belongs to another node (its node affinity does not match node %q)", pv.Name, node.Name)
		}
	}
	switch {
	case pv.Spec.Local != nil && pv.Spec.Local.Path != "":
		return pv.Spec.Local.Path, nil
	case pv.Spec.HostPath != nil && pv.Spec.HostPath.Path != "":
		return pv.Spec.HostPath.Path, nil
	}
	return "", fmt.Errorf("persistentvolume %q: only local and hostPath volumes are supported by kube agent", pv.Name)
}
