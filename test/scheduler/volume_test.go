package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

const annSelectedNode = "volume.kubernetes.io/selected-node"

// TestVolumeBinding: VolumeBinding with WaitForFirstConsumer and bound claims. Three nodes
// of the test's own: vb-0 has 8 CPUs, vb-1 and vb-2 have 2, so LeastAllocated alone would
// always pick vb-0; the volumes' node affinity must win.
//   - an unbound claim of a WaitForFirstConsumer class without a provisioner and one local
//     PV on vb-1: the pod goes to vb-1 and the scheduler binds the PV (PreBind; the PV
//     controller completes the claim);
//   - a claim already bound to a local PV on vb-2: the pod goes to vb-2;
//   - an unbound claim of a WaitForFirstConsumer class with a provisioner: the scheduler
//     writes volume.kubernetes.io/selected-node on the claim and waits; the test plays the
//     provisioner (a PV for the claim on that node) and the pod is bound to that node.
func TestVolumeBinding(t *testing.T) {
	cs := cluster(t)
	ns := "volumes"
	createNamespace(t, cs, ns)
	const key = "test-volumes"
	extraNodes(t, cs, key, []nodeSpec{{name: "vb-0", cpu: "8", memory: "16Gi"}, {name: "vb-1", cpu: "2", memory: "16Gi"}, {name: "vb-2", cpu: "2", memory: "16Gi"}})

	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "vb-local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		{ObjectMeta: metav1.ObjectMeta{Name: "vb-static"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate},
		{ObjectMeta: metav1.ObjectMeta{Name: "vb-provisioned"}, Provisioner: "example.com/vb", VolumeBindingMode: &wffc},
	} {
		if _, err := cs.StorageV1().StorageClasses().Create(ctxT(t), sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := sc.Name
		t.Cleanup(func() { _ = cs.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	createPV(t, cs, localPV("vb-pv-1", "vb-local", "vb-1", nil))
	createPV(t, cs, localPV("vb-pv-2", "vb-static", "vb-2", nil))
	for _, c := range [][2]string{{"wffc", "vb-local"}, {"bound", "vb-static"}, {"dynamic", "vb-provisioned"}} {
		createPVC(t, cs, ns, c[0], c[1])
	}
	t.Cleanup(func() {
		for _, p := range []string{"uses-wffc", "uses-bound", "uses-dynamic"} {
			_ = deletePodNow(cs, ns, p)
		}
	})

	// The statically bound claim is bound by the PV controller before its pod exists.
	waitClaimBound(t, cs, ns, "bound", "vb-pv-2")
	create(t, cs, onlyOn(withVolume(withRequests(pausePod(ns, "uses-bound"), "500m", "1Gi"), "bound"), key, ""))
	if got := waitScheduled(t, cs, ns, "uses-bound"); got != "vb-2" {
		t.Errorf("pod with a claim bound to vb-2's volume on %s", got)
	}

	create(t, cs, onlyOn(withVolume(withRequests(pausePod(ns, "uses-wffc"), "500m", "1Gi"), "wffc"), key, ""))
	if got := waitScheduled(t, cs, ns, "uses-wffc"); got != "vb-1" {
		t.Errorf("pod with a WaitForFirstConsumer claim matching vb-1's volume on %s", got)
	}
	waitClaimBound(t, cs, ns, "wffc", "vb-pv-1")

	create(t, cs, onlyOn(withVolume(withRequests(pausePod(ns, "uses-dynamic"), "500m", "1Gi"), "dynamic"), key, ""))
	var selected string
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "dynamic", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if selected = c.Annotations[annSelectedNode]; selected == "" {
			return fmt.Errorf("claim has no %s yet: %v", annSelectedNode, c.Annotations)
		}
		return nil
	})
	if selected != "vb-0" {
		// vb-0 is the emptiest node that fits (LeastAllocated; no volume constrains it).
		t.Errorf("selected node %s, want vb-0", selected)
	}
	if p, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "uses-dynamic", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("pod bound before its claim was provisioned: %v %q", err, p.Spec.NodeName)
	}
	claim, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctxT(t), "dynamic", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The provisioner's part: a volume on the selected node, bound to the claim.
	createPV(t, cs, localPV("vb-pv-dynamic", "vb-provisioned", selected, &corev1.ObjectReference{Kind: "PersistentVolumeClaim",
		Namespace: ns, Name: "dynamic", UID: claim.UID}))
	if got := waitScheduled(t, cs, ns, "uses-dynamic"); got != selected {
		t.Errorf("pod with a provisioned claim on %s, selected node %s", got, selected)
	}
	waitClaimBound(t, cs, ns, "dynamic", "vb-pv-dynamic")
}

func localPV(name, class, node string, claim *corev1.ObjectReference) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      claim,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
		}}
	if claim != nil {
		pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "example.com/vb"}
	}
	return pv
}

func createPV(t *testing.T, cs kubernetes.Interface, pv *corev1.PersistentVolume) {
	t.Helper()
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctxT(t), pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PV %s: %v", pv.Name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
}

func createPVC(t *testing.T, cs kubernetes.Interface, ns, name, class string) {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctxT(t), c, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PVC %s: %v", name, err)
	}
}

func withVolume(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	return p
}

// waitClaimBound waits until the claim is Bound to the volume.
func waitClaimBound(t *testing.T, cs kubernetes.Interface, ns, name, volume string) {
	t.Helper()
	servertest.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName != volume {
			return fmt.Errorf("claim %s: phase %s volume %q, want Bound to %s", name, c.Status.Phase, c.Spec.VolumeName, volume)
		}
		return nil
	})
}
