package workload

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// TestWriteAnswersEqualReads: what a create or an update answers (protobuf, as client-go's
// typed clients read it) is exactly what a GET of the object answers afterwards. The write's
// answer is encoded from the typed object its validation produced, the GET's from the stored
// content; both must be the same object, field for field — defaults, what admission added
// (the service account token volume), what the strategy cleared, the allocated cluster IP.
func TestWriteAnswersEqualReads(t *testing.T) {
	cs := clientset(t)
	ns := "write-answers"
	makeNS(t, cs, ns)
	// The ServiceAccount plugin adds the token volume once the default ServiceAccount exists.
	if err := wait.PollUntilContextTimeout(ctxT(t), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no default ServiceAccount: %v", err)
	}
	same := func(t *testing.T, what string, answered, read any) {
		t.Helper()
		if d := cmp.Diff(answered, read); d != "" {
			t.Errorf("%s: the write's answer differs from a GET (-answer +get):\n%s", what, d)
		}
	}
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: newPod("", nil).Spec}

	t.Run("Pod", func(t *testing.T) {
		p := newPod("p", labels)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")}
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"true"}}}
		p.Spec.SchedulerName = "nobody" // no scheduler writes its status meanwhile
		created, err := cs.CoreV1().Pods(ns).Create(ctxT(t), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(created.Spec.Volumes) == 0 {
			t.Errorf("no service account token volume in the answer: %+v", created.Spec.Volumes)
		}
		got, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "create pod", created, got)
		got.Status.Conditions = append(got.Status.Conditions, corev1.PodCondition{Type: "example.com/ready", Status: corev1.ConditionTrue})
		updated, err := cs.CoreV1().Pods(ns).UpdateStatus(ctxT(t), got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		again, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "pod status update", updated, again)
		again.Labels["tier"] = "front"
		updated, err = cs.CoreV1().Pods(ns).Update(ctxT(t), again, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		final, err := cs.CoreV1().Pods(ns).Get(ctxT(t), "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "pod update", updated, final)
	})

	t.Run("Deployment", func(t *testing.T) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
		created, err := cs.AppsV1().Deployments(ns).Create(ctxT(t), d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cs.AppsV1().Deployments(ns).Get(ctxT(t), "d", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The deployment controller may have written status in between: compare the spec
		// and the metadata as created, then the update's answer with the next read.
		if got.ResourceVersion == created.ResourceVersion {
			same(t, "create deployment", created, got)
		} else {
			same(t, "create deployment (spec)", created.Spec, got.Spec)
		}
		// The controller's status writes race the update: retry it on a conflict, from a
		// fresh read, as kubectl edit would.
		var updated *appsv1.Deployment
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got.Spec.Replicas = ptr.To[int32](3)
			var uerr error
			if updated, uerr = cs.AppsV1().Deployments(ns).Update(ctxT(t), got, metav1.UpdateOptions{}); apierrors.IsConflict(uerr) {
				if fresh, gerr := cs.AppsV1().Deployments(ns).Get(ctxT(t), "d", metav1.GetOptions{}); gerr == nil {
					got = fresh
				}
			}
			return uerr
		})
		if err != nil {
			t.Fatal(err)
		}
		again, err := cs.AppsV1().Deployments(ns).Get(ctxT(t), "d", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion == updated.ResourceVersion {
			same(t, "update deployment", updated, again)
		} else {
			same(t, "update deployment (spec)", updated.Spec, again.Spec)
		}
	})

	t.Run("Service", func(t *testing.T) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{
			Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		created, err := cs.CoreV1().Services(ns).Create(ctxT(t), s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.ClusterIP == "" {
			t.Error("no cluster IP in the answer")
		}
		got, err := cs.CoreV1().Services(ns).Get(ctxT(t), "s", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "create service", created, got)
	})

	t.Run("Job", func(t *testing.T) {
		jt := template
		jt.Labels = nil
		jt.Spec.RestartPolicy = corev1.RestartPolicyNever
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Spec: batchv1.JobSpec{Template: jt, Suspend: ptr.To(true)}}
		created, err := cs.BatchV1().Jobs(ns).Create(ctxT(t), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cs.BatchV1().Jobs(ns).Get(ctxT(t), "j", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion == created.ResourceVersion {
			same(t, "create job", created, got)
		} else {
			same(t, "create job (spec)", created.Spec, got.Spec)
		}
	})

	t.Run("PersistentVolumeClaim", func(t *testing.T) {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		created, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctxT(t), c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Status.Phase != corev1.ClaimPending {
			t.Errorf("answered phase %q, want Pending (the defaults of the cleared status)", created.Status.Phase)
		}
		got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctxT(t), "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion == created.ResourceVersion {
			same(t, "create claim", created, got)
		}
	})

	t.Run("PodDisruptionBudget", func(t *testing.T) {
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromString("50%")), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
		created, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctxT(t), b, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctxT(t), "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion == created.ResourceVersion {
			same(t, "create pdb", created, got)
		} else {
			same(t, "create pdb (spec)", created.Spec, got.Spec)
		}
	})
}
