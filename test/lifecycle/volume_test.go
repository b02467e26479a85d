package lifecycle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	kubeos "kubeos.dev/kube/pkg/client/clientset/versioned/typed/kubeos/v1alpha1"
)

func newVolume(name, size, policy string) *v1alpha1.Volume {
	return &v1alpha1.Volume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.VolumeSpec{Size: resource.MustParse(size), DeletionPolicy: policy}}
}

// waitVolume polls the Volume until ok.
func waitVolume(t *testing.T, ks kubeos.KubeosV1alpha1Interface, ns, name, what string, ok func(*v1alpha1.Volume) bool) *v1alpha1.Volume {
	t.Helper()
	var last *v1alpha1.Volume
	servertest.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		v, err := ks.Volumes(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = v
		if !ok(v) {
			return fmt.Errorf("volume %s not %s: %+v", name, what, v.Status)
		}
		return nil
	})
	return last
}

func active(v *v1alpha1.Volume) bool {
	return v.Status.Phase == "Active" && v.Status.ObservedGeneration == v.Generation
}

func TestStorageClassIsDefault(t *testing.T) {
	volumeSuite.Need(t)
	cs, _ := clients(t)
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		sc, err := cs.StorageV1().StorageClasses().Get(context.Background(), "local-path", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sc.Provisioner != "kubeos.dev/local-path" || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != "WaitForFirstConsumer" ||
			sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion || sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			return fmt.Errorf("class %+v", sc)
		}
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			return fmt.Errorf("not the default class: %v", sc.Annotations)
		}
		return nil
	})
}

// TestVolumeKeepsDataAcrossPods is the Volume's life: Active before any pod (the class
// binds on first consumer), a pod writes a file, a new pod on the same node reads it, the
// Volume grows (shrinking is refused), the agent's archive holds the file, and Delete
// removes claim, PV and directory.
func TestVolumeKeepsDataAcrossPods(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Volumes(ns).Create(ctx, newVolume("data", "64Mi", v1alpha1.DeletionDelete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := waitVolume(t, ks, ns, "data", "Active", active)
	if v.Status.ClaimName != "data-volume" || v.Status.StorageClass != "local-path" || v.Status.VolumeName != "" {
		t.Fatalf("status before a consumer: %+v", v.Status)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-volume", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.Kind != "Volume" || ref.UID != v.UID || pvc.Labels["kubeos.dev/volume"] != "data" {
		t.Fatalf("claim's owner %v labels %v", pvc.OwnerReferences, pvc.Labels)
	}

	w := runPod(t, cs, ns, claimPod("writer", "", "data-volume", "echo kept > /data/f && ls -ld /data"))
	if w.Status.Phase != corev1.PodSucceeded || w.Spec.NodeName != nodeName {
		t.Fatalf("writer: phase %s on %q: %+v", w.Status.Phase, w.Spec.NodeName, w.Status.ContainerStatuses)
	}
	v = waitVolume(t, ks, ns, "data", "bound", func(v *v1alpha1.Volume) bool {
		return active(v) && v.Status.VolumeName != "" && v.Status.Capacity != nil
	})
	if v.Status.Node != nodeName || v.Status.Capacity.Cmp(resource.MustParse("64Mi")) != 0 {
		t.Fatalf("bound status: %+v", v.Status)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, v.Status.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(agentDir, "volumes", pv.Name)
	if pv.Spec.Local == nil || pv.Spec.Local.Path != dir || pv.Annotations["pv.kubernetes.io/provisioned-by"] != "kubeos.dev/local-path" {
		t.Fatalf("pv %s: %+v %v", pv.Name, pv.Spec.PersistentVolumeSource, pv.Annotations)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "kept\n" {
		t.Fatalf("file on the node: %q, %v", b, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("directory mode: %v, %v", fi, err)
	}
	deletePod(t, cs, ns, "writer")
	r := runPod(t, cs, ns, claimPod("reader", "", "data-volume", `test "$(cat /data/f)" = kept`))
	if r.Status.Phase != corev1.PodSucceeded || r.Spec.NodeName != nodeName {
		t.Fatalf("reader: phase %s on %q: %+v", r.Status.Phase, r.Spec.NodeName, r.Status.ContainerStatuses)
	}

	// The agent's archive of the volume, through nodes/proxy as a Backup reaches it.
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "volumes", pv.Name, "archive").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if files := tarFiles(t, raw); files["f"] != "kept\n" {
		t.Fatalf("archive holds %v", files)
	}

	// Expansion, then a refused shrink.
	patch := []byte(`{"spec":{"size":"128Mi"}}`)
	if _, err := ks.Volumes(ns).Patch(ctx, "data", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVolume(t, ks, ns, "data", "expanded", func(v *v1alpha1.Volume) bool {
		return active(v) && v.Status.Capacity != nil && v.Status.Capacity.Cmp(resource.MustParse("128Mi")) == 0
	})
	pv, err = cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("128Mi")) != 0 {
		t.Fatalf("pv capacity %s", q.String())
	}
	_, err = ks.Volumes(ns).Patch(ctx, "data", types.MergePatchType, []byte(`{"spec":{"size":"32Mi"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot shrink") {
		t.Fatalf("shrink: %v, want 422 cannot shrink", err)
	}

	// Delete: the claim, then the PV and the directory go.
	deletePod(t, cs, ns, "reader")
	if err := ks.Volumes(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		if _, err := ks.Volumes(ns).Get(ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume still there: %v", err)
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-volume", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim still there: %v", err)
		}
		if p, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pv still there: %v %v", err, p.Status.Phase)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("directory still there: %v", err)
		}
		return nil
	})
}

// TestVolumeRetain: deleting a Volume of deletionPolicy Retain keeps the claim (orphaned),
// its PV and the data.
func TestVolumeRetain(t *testing.T) {
	volumeSuite.Need(t)
	cs, ks := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := ks.Volumes(ns).Create(ctx, newVolume("keep", "16Mi", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := waitVolume(t, ks, ns, "keep", "Active", active)
	if p := runPod(t, cs, ns, claimPod("writer", "", "keep-volume", "echo retained > /data/f")); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("writer: %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	v = waitVolume(t, ks, ns, "keep", "bound", func(v *v1alpha1.Volume) bool { return v.Status.VolumeName != "" })
	deletePod(t, cs, ns, "writer")
	if err := ks.Volumes(ns).Delete(ctx, "keep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		if _, err := ks.Volumes(ns).Get(ctx, "keep", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume still there: %v", err)
		}
		return nil
	})
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "keep-volume", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("retained claim: %v", err)
	}
	if len(pvc.OwnerReferences) != 0 || pvc.DeletionTimestamp != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("retained claim: owners %v, deleting %v, phase %s", pvc.OwnerReferences, pvc.DeletionTimestamp, pvc.Status.Phase)
	}
	if b, err := os.ReadFile(filepath.Join(agentDir, "volumes", v.Status.VolumeName, "f")); err != nil || string(b) != "retained\n" {
		t.Fatalf("retained data: %q, %v", b, err)
	}
}

// TestClaimOfAnotherNode: a pod placed on this node whose claim is bound to a PV of
// another node waits with FailedMount naming that; an unbound claim too.
func TestClaimOfAnotherNode(t *testing.T) {
	volumeSuite.Need(t)
	cs, _ := clients(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	pvName := "elsewhere-" + ns
	hostDir := t.TempDir()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "far"},
		PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: hostDir}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"another-node"}}}}}}},
	}}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	empty := ""
	for _, c := range []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "far"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pvName, StorageClassName: &empty,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unbound"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &empty,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	} {
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "far", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim far: %s", c.Status.Phase)
		}
		return nil
	})
	for pod, want := range map[string]string{"far": "belongs to another node", "unbound": `persistentvolumeclaim "unbound" is not bound`} {
		p := claimPod(pod, nodeName, pod, "true")
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, cs, ns, pod, "FailedMount", want)
		got, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodPending {
			t.Fatalf("pod %s: phase %s, want Pending", pod, got.Status.Phase)
		}
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Fatalf("another node's directory was used: %v", entries)
	}
}

// waitEvent waits for an event of reason on pod whose message contains want.
func waitEvent(t *testing.T, cs kubernetes.Interface, ns, pod, reason, want string) {
	t.Helper()
	servertest.Eventually(t, time.Minute, 250*time.Millisecond, func() error {
		list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name != pod {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("pod %s: no %s event with %q among %v", pod, reason, want, seen)
	})
}

// tarFiles reads a gzipped tar's regular files.
func tarFiles(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}
