package apps

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// podLog records, from a watch of a namespace's pods, the order in which pods appeared
// and became Ready ("add web-0", "ready web-0", ...).
type podLog struct {
	mu    sync.Mutex
	steps []string
}

func watchPods(t *testing.T, cs kubernetes.Interface, ns string) *podLog {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &podLog{}
	go func() {
		ready := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			l.mu.Lock()
			switch ev.Type {
			case watch.Added:
				l.steps = append(l.steps, "add "+p.Name)
			case watch.Deleted:
				l.steps = append(l.steps, "delete "+p.Name)
				delete(ready, p.Name)
			}
			if podReady(p) && !ready[p.Name] {
				ready[p.Name] = true
				l.steps = append(l.steps, "ready "+p.Name)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *podLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.steps)
}

func getStatefulSet(t *testing.T, cs kubernetes.Interface, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	s, err := cs.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStatefulSetOrderedAndPartitioned: OrderedReady creates web-5, web-6, web-7 (ordinals
// from .spec.ordinals.start) one after the other is Ready; a RollingUpdate with partition
// 2 updates only the ordinals at or above start+2, and partition 0 then the rest, newest
// ordinal first.
func TestStatefulSetOrderedAndPartitioned(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "statefulset")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	log := watchPods(t, cs, ns)
	l := map[string]string{"app": "web"}
	set, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: l}, Template: podTemplate(l),
			ServiceName: "web", Ordinals: &appsv1.StatefulSetOrdinals{Start: 5},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownedReady(t, cs, ns, "app=web", set.UID, 3)
	steps := log.snapshot()
	want := []string{"add web-5", "ready web-5", "add web-6", "ready web-6", "add web-7", "ready web-7"}
	if !slices.Equal(steps[:min(len(steps), len(want))], want) {
		t.Errorf("pods appeared as %v, want %v", steps, want)
	}
	for _, p := range podsOf(t, cs, ns, "app=web") {
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != "web" || p.Labels[appsv1.StatefulSetPodNameLabel] != p.Name || p.Labels[appsv1.PodIndexLabel] != p.Name[len("web-"):] {
			t.Errorf("pod %s: hostname %q subdomain %q labels %v", p.Name, p.Spec.Hostname, p.Spec.Subdomain, p.Labels)
		}
	}
	var rev0 string
	eventually(t, 30*time.Second, func() error {
		s := getStatefulSet(t, cs, ns, "web").Status
		if s.ReadyReplicas != 3 || s.CurrentReplicas != 3 || s.UpdatedReplicas != 3 || s.CurrentRevision == "" || s.CurrentRevision != s.UpdateRevision {
			return fmt.Errorf("status %+v", s)
		}
		rev0 = s.CurrentRevision
		return nil
	})
	if _, err := cs.AppsV1().ControllerRevisions(ns).Get(ctx, rev0, metav1.GetOptions{}); err != nil {
		t.Errorf("ControllerRevision %s of the current revision: %v", rev0, err)
	}

	// Partition 2: only web-7 (ordinal start+2) moves to the new revision.
	patch := []byte(`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2}},"template":{"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}}}}`)
	if _, err := cs.AppsV1().StatefulSets(ns).Patch(ctx, "web", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var rev1 string
	eventually(t, 60*time.Second, func() error {
		s := getStatefulSet(t, cs, ns, "web").Status
		if s.UpdateRevision == rev0 || s.UpdatedReplicas != 1 || s.ReadyReplicas != 3 || s.CurrentRevision != rev0 {
			return fmt.Errorf("status %+v", s)
		}
		rev1 = s.UpdateRevision
		return nil
	})
	for _, p := range podsOf(t, cs, ns, "app=web") {
		wantRev := rev0
		if p.Name == "web-7" {
			wantRev = rev1
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != wantRev {
			t.Errorf("pod %s at revision %s, want %s", p.Name, got, wantRev)
		}
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Patch(ctx, "web", "application/merge-patch+json", []byte(`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		s := getStatefulSet(t, cs, ns, "web").Status
		if s.CurrentRevision != rev1 || s.UpdatedReplicas != 3 || s.ReadyReplicas != 3 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	var deletes []string
	for _, s := range log.snapshot() {
		if len(s) > 7 && s[:7] == "delete " {
			deletes = append(deletes, s[7:])
		}
	}
	if !slices.Equal(deletes, []string{"web-7", "web-6", "web-5"}) {
		t.Errorf("rolling update deleted %v, want web-7, web-6, web-5 in that order", deletes)
	}
}

// TestStatefulSetVolumeClaims: a Parallel StatefulSet with a volumeClaimTemplate gets one
// PVC per ordinal (data-db-0, data-db-1) labelled like its pods and, under a
// WhenDeleted=Delete retention policy, owned by the set; bound (by the test, standing in
// for the PV binder) the pods run with them.
func TestStatefulSetVolumeClaims(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "statefulset-pvc")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	l := map[string]string{"app": "db"}
	tmpl := podTemplate(l)
	tmpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	set, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: l}, Template: tmpl,
			PodManagementPolicy:                  appsv1.ParallelPodManagement,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data-db-0", "data-db-1"} {
		var pvc *corev1.PersistentVolumeClaim
		eventually(t, 30*time.Second, func() error {
			pvc, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
		if pvc.Labels["app"] != "db" {
			t.Errorf("PVC %s labels %v, want the pod template's", name, pvc.Labels)
		}
		bindClaim(t, cs, pvc)
	}
	ownedReady(t, cs, ns, "app=db", set.UID, 2)
	eventually(t, 30*time.Second, func() error {
		for _, name := range []string{"data-db-0", "data-db-1"} {
			pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != set.UID {
				return fmt.Errorf("PVC %s controller %+v, want the StatefulSet (WhenDeleted=Delete)", name, ref)
			}
		}
		return nil
	})
	for _, p := range podsOf(t, cs, ns, "app=db") {
		if v := p.Spec.Volumes; len(v) == 0 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "data-"+p.Name {
			t.Errorf("pod %s volumes %+v, want claim data-%s", p.Name, v, p.Name)
		}
	}
}

// bindClaim binds pvc to a new PersistentVolume made for it, as the PV binder would.
func bindClaim(t *testing.T, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvc.Namespace + "-" + pvc.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + pvc.Name}},
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	pv, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Spec.VolumeName == "" {
			c.Spec.VolumeName = pv.Name
			if c, err = cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if c.Status.Phase != corev1.ClaimBound {
			c.Status.Phase = corev1.ClaimBound
			c.Status.AccessModes = pv.Spec.AccessModes
			c.Status.Capacity = pv.Spec.Capacity
			if _, err := cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}
