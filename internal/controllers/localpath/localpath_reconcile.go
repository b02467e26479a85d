package localpath

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Names of the provisioner, its class and the annotations it reads and writes.
const (
	// ProvisionerName is the StorageClass provisioner this package serves.
	ProvisionerName = "kubeos.dev/local-path"
	// ClassName is the StorageClass Start ensures.
	ClassName = "local-path"
	// Finalizer stays on a provisioned PV until its node's agent removed the directory.
	Finalizer = "kubeos.dev/local-path-cleanup"
	// AnnNode names the node holding a PV's directory.
	AnnNode = "kubeos.dev/local-path-node"

	annProvisionedBy          = "pv.kubernetes.io/provisioned-by"
	annSelectedNode           = "volume.kubernetes.io/selected-node"
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	annDefaultClass           = "storageclass.kubernetes.io/is-default-class"
	annBetaDefaultClass       = "storageclass.beta.kubernetes.io/is-default-class"
	simNodeAnnotation         = "sim.kubeos.dev/node"
	simulatedDir              = "/simulated/volumes"
)

// defaultClass is the StorageClass to create given the existing ones (nil: local-path
// exists already). It is the default class only when no other class is.
func defaultClass(existing []*storagev1.StorageClass) *storagev1.StorageClass {
	isDefault := true
	for _, c := range existing {
		if c.Name == ClassName {
			return nil
		}
		if c.Annotations[annDefaultClass] == "true" || c.Annotations[annBetaDefaultClass] == "true" {
			isDefault = false
		}
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: ClassName, Labels: map[string]string{"app.kubernetes.io/managed-by": "kube"}},
		Provisioner:          ProvisionerName,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
	if isDefault {
		sc.Annotations = map[string]string{annDefaultClass: "true"}
	}
	return sc
}

// volumeName is the PV provisioned for claim (external-provisioner's convention).
func volumeName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

// claimAction is what a claim needs.
type claimAction int

const (
	claimNone         claimAction = iota
	claimProvision                // make the directory and the PV
	claimExpandPV                 // raise the PV's capacity
	claimExpandStatus             // record the PV's capacity in the claim's status
)

// ours reports whether class is served by this provisioner.
func ours(class *storagev1.StorageClass) bool {
	return class != nil && class.Provisioner == ProvisionerName
}

// decideClaim decides for a claim of class (nil: unknown class), with pv the volume named
// provisioned for it or bound to it (nil: none). The string explains a wait.
func decideClaim(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, pv *corev1.PersistentVolume) (claimAction, string) {
	if claim.DeletionTimestamp != nil {
		return claimNone, ""
	}
	if claim.Spec.VolumeName == "" {
		if !ours(class) {
			return claimNone, ""
		}
		if p := claim.Annotations[annStorageProvisioner]; p != "" && p != ProvisionerName {
			return claimNone, ""
		}
		if claim.Annotations[annSelectedNode] == "" {
			return claimNone, "waiting for a pod to be scheduled (the class binds on first consumer)"
		}
		if pv != nil {
			return claimNone, "" // provisioned; the binder binds it
		}
		return claimProvision, ""
	}
	if pv == nil || pv.Annotations[annProvisionedBy] != ProvisionerName || claim.Status.Phase != corev1.ClaimBound {
		return claimNone, ""
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) > 0 {
		if class != nil && !ptr.Deref(class.AllowVolumeExpansion, false) {
			return claimNone, fmt.Sprintf("class %s does not allow expansion", class.Name)
		}
		return claimExpandPV, ""
	}
	if cur := claim.Status.Capacity[corev1.ResourceStorage]; have.Cmp(cur) > 0 {
		return claimExpandStatus, ""
	}
	return claimNone, ""
}

// newVolume is the PV for claim of class on node, whose directory is dir.
func newVolume(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node *corev1.Node, dir string) *corev1.PersistentVolume {
	host := node.Labels[corev1.LabelHostname]
	if host == "" {
		host = node.Name
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	modes := claim.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeName(claim),
			Annotations: map[string]string{annProvisionedBy: ProvisionerName, AnnNode: node.Name},
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "kube"},
			Finalizers:  []string{Finalizer},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claimSize(claim)},
			AccessModes:                   modes,
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  class.MountOptions,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name,
				UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}},
			}}}},
		},
	}
}

// claimSize is the claim's storage request (0 when none).
func claimSize(claim *corev1.PersistentVolumeClaim) resource.Quantity {
	if q, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		return q
	}
	return resource.Quantity{}
}

// simulated reports whether node is a simulated node (no agent, no disk).
func simulated(node *corev1.Node) bool { return node.Annotations[simNodeAnnotation] != "" }

// simulatedPath is a simulated node's directory for pv.
func simulatedPath(pv string) string { return path.Join(simulatedDir, pv) }

// volumeAction is what a PV needs.
type volumeAction int

const (
	volumeNone          volumeAction = iota
	volumeCleanup                    // the agent removes the directory, then the finalizer goes (and a Released PV is deleted)
	volumeDropFinalizer              // deleted with Retain: the directory stays
)

// decideVolume decides for a PV.
func decideVolume(pv *corev1.PersistentVolume) volumeAction {
	if pv.Annotations[annProvisionedBy] != ProvisionerName || !hasFinalizer(pv) {
		return volumeNone
	}
	del := pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
	switch {
	case pv.DeletionTimestamp != nil && del:
		return volumeCleanup
	case pv.DeletionTimestamp != nil:
		return volumeDropFinalizer
	case pv.Status.Phase == corev1.VolumeReleased && del:
		return volumeCleanup
	}
	return volumeNone
}

func hasFinalizer(pv *corev1.PersistentVolume) bool {
	for _, f := range pv.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

// volumeNode is the node holding pv's directory.
func volumeNode(pv *corev1.PersistentVolume) string {
	if n := pv.Annotations[AnnNode]; n != "" {
		return n
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		for _, t := range a.Required.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				if e.Key == corev1.LabelHostname && len(e.Values) == 1 {
					return e.Values[0]
				}
			}
		}
	}
	return ""
}
