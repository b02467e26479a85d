package apps

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func podTemplate(l map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: l},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.9"}}},
	}
}

// ownedReady waits until exactly n live pods match selector, all Ready and controlled by
// the owner uid, and returns them.
func ownedReady(t *testing.T, cs kubernetes.Interface, ns, sel string, uid types.UID, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 60*time.Second, func() error {
		pods = nil
		for _, p := range podsOf(t, cs, ns, sel) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != uid {
				return fmt.Errorf("pod %s is not controlled by %s", p.Name, uid)
			}
			if !podReady(&p) {
				return fmt.Errorf("pod %s not ready", p.Name)
			}
			pods = append(pods, p)
		}
		if len(pods) != n {
			return fmt.Errorf("%d live pods, want %d", len(pods), n)
		}
		return nil
	})
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestReplicaSetHealsAdoptsReleases: a deleted pod is replaced; an orphan pod matching
// the selector is adopted (and the surplus deleted); a pod relabelled out of the selector
// is released (its controller reference removed) and replaced.
func TestReplicaSetHealsAdoptsReleases(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "replicaset")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	l := map[string]string{"app": "rs"}
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: l}, Template: podTemplate(l)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := ownedReady(t, cs, ns, "app=rs", rs.UID, 3)
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref.Kind != "ReplicaSet" || ref.Name != "rs" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s controller ref %+v", p.Name, ref)
		}
	}
	eventually(t, 30*time.Second, func() error {
		got, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, "rs", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := got.Status; s.Replicas != 3 || s.ReadyReplicas != 3 || s.AvailableReplicas != 3 || s.FullyLabeledReplicas != 3 || s.ObservedGeneration != got.Generation {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	// Heal.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	healed := ownedReady(t, cs, ns, "app=rs", rs.UID, 3)
	for _, p := range healed {
		if p.Name == pods[0].Name {
			t.Errorf("deleted pod %s still counted", p.Name)
		}
	}

	// Adopt: an orphan with the selector's labels becomes the ReplicaSet's, and one pod
	// goes so that three remain — often the orphan itself, the newest and least ready
	// (upstream's deletion order). The ReplicaSet deletes only pods it owns, so the orphan
	// gone means it was adopted first.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: l}, Spec: podTemplate(l).Spec}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != rs.UID {
			return fmt.Errorf("orphan's controller is %+v", ref)
		}
		return nil
	})
	ownedReady(t, cs, ns, "app=rs", rs.UID, 3)

	// Release: relabel a pod out of the selector.
	victim := ownedReady(t, cs, ns, "app=rs", rs.UID, 3)[0].Name
	patch := []byte(`{"metadata":{"labels":{"app":"gone"}}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, victim, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref != nil {
			return fmt.Errorf("released pod still controlled by %s", ref.Name)
		}
		return nil
	})
	ownedReady(t, cs, ns, "app=rs", rs.UID, 3)
}

// TestReplicationController: the legacy kind scales and heals like a ReplicaSet, through
// kubectl scale.
func TestReplicationController(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "replication")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	l := map[string]string{"app": "rc"}
	tmpl := podTemplate(l)
	rc, err := cs.CoreV1().ReplicationControllers(ns).Create(ctx, &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "rc"},
		Spec:       corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2), Selector: l, Template: &tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := ownedReady(t, cs, ns, "app=rc", rc.UID, 2)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ownedReady(t, cs, ns, "app=rc", rc.UID, 2)
	k := newKubectl(t, "1.33")
	k.ok("", "-n", ns, "scale", "rc/rc", "--replicas=4")
	ownedReady(t, cs, ns, "app=rc", rc.UID, 4)
	eventually(t, 30*time.Second, func() error {
		got, err := cs.CoreV1().ReplicationControllers(ns).Get(ctx, "rc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := got.Status; s.Replicas != 4 || s.ReadyReplicas != 4 || s.AvailableReplicas != 4 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	k.ok("", "-n", ns, "scale", "rc/rc", "--replicas=1")
	ownedReady(t, cs, ns, "app=rc", rc.UID, 1)
}
