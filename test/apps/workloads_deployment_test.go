package apps

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestDeploymentRollout drives a Deployment through kubectl as a user does: create,
// rollout status, set image, history, undo, pause/resume, restart and scale; each step's
// ReplicaSets, revisions and conditions are upstream's.
func TestDeploymentRollout(t *testing.T) {
	appsSuite.Need(t)
	for _, v := range []string{"1.27", "1.33"} {
		t.Run("kubectl"+v, func(t *testing.T) {
			t.Parallel()
			testRollout(t, v)
		})
	}
}

func testRollout(t *testing.T, version string) {
	cs := clientset(t)
	ns := namespace(t, cs, "rollout-"+strings.ReplaceAll(version, ".", "-"))
	dumpOnFailure(t, ns)
	k := newKubectl(t, version)
	ctx := ctxT(t, 5*time.Minute)
	status := func() {
		t.Helper()
		out := k.ok("", "-n", ns, "rollout", "status", "deployment/web", "--timeout=40s")
		contains(t, "rollout status", out, `deployment "web" successfully rolled out`)
	}

	k.ok("", "-n", ns, "create", "deployment", "web", "--image=registry.k8s.io/pause:3.9", "--replicas=3")
	status()
	d := getDeployment(t, cs, ns, "web")
	checkComplete(t, d, 3)
	rs1 := newReplicaSet(t, cs, d)
	if rs1.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Errorf("first ReplicaSet's revision = %q, want 1", rs1.Annotations["deployment.kubernetes.io/revision"])
	}
	if want := "web-" + rs1.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; rs1.Name != want {
		t.Errorf("ReplicaSet name %q, want %q (deployment name and pod-template-hash)", rs1.Name, want)
	}
	if ref := metav1.GetControllerOf(rs1); ref == nil || ref.Kind != "Deployment" || ref.Name != "web" || ref.UID != d.UID {
		t.Errorf("ReplicaSet's controller = %+v, want the Deployment", ref)
	}

	k.ok("", "-n", ns, "set", "image", "deployment/web", "pause=registry.k8s.io/pause:3.10")
	status()
	d = getDeployment(t, cs, ns, "web")
	checkComplete(t, d, 3)
	rs2 := newReplicaSet(t, cs, d)
	if rs2.Name == rs1.Name || rs2.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Errorf("after set image: new ReplicaSet %s revision %q, want a second one at revision 2", rs2.Name, rs2.Annotations["deployment.kubernetes.io/revision"])
	}
	old, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, rs1.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *old.Spec.Replicas != 0 {
		t.Errorf("old ReplicaSet kept %d replicas, want 0", *old.Spec.Replicas)
	}
	out := k.ok("", "-n", ns, "rollout", "history", "deployment/web")
	revs := historyRevisions(out)
	if fmt.Sprint(revs) != "[1 2]" {
		t.Errorf("rollout history revisions = %v, want [1 2]", revs)
	}

	k.ok("", "-n", ns, "rollout", "undo", "deployment/web")
	status()
	d = getDeployment(t, cs, ns, "web")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.k8s.io/pause:3.9" {
		t.Errorf("after undo the image is %s, want pause:3.9", img)
	}
	rs3 := newReplicaSet(t, cs, d)
	if rs3.Name != rs1.Name || rs3.Annotations["deployment.kubernetes.io/revision"] != "3" {
		t.Errorf("after undo the new ReplicaSet is %s at revision %q, want %s at revision 3", rs3.Name, rs3.Annotations["deployment.kubernetes.io/revision"], rs1.Name)
	}
	if revs := historyRevisions(k.ok("", "-n", ns, "rollout", "history", "deployment/web")); fmt.Sprint(revs) != "[2 3]" {
		t.Errorf("rollout history after undo = %v, want [2 3]", revs)
	}

	// Paused: a template change is recorded (observedGeneration) but rolls nothing.
	k.ok("", "-n", ns, "rollout", "pause", "deployment/web")
	k.ok("", "-n", ns, "set", "image", "deployment/web", "pause=registry.k8s.io/pause:3.8")
	eventually(t, 30*time.Second, func() error {
		d = getDeployment(t, cs, ns, "web")
		if d.Status.ObservedGeneration != d.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", d.Status.ObservedGeneration, d.Generation)
		}
		if c := condition(d, appsv1.DeploymentProgressing); c == nil || c.Reason != "DeploymentPaused" {
			return fmt.Errorf("Progressing = %+v, want reason DeploymentPaused", c)
		}
		return nil
	})
	if n := len(replicaSets(t, cs, ns)); n != 2 {
		t.Errorf("paused Deployment has %d ReplicaSets, want still 2", n)
	}
	k.ok("", "-n", ns, "rollout", "resume", "deployment/web")
	status()
	d = getDeployment(t, cs, ns, "web")
	checkComplete(t, d, 3)
	if rs := newReplicaSet(t, cs, d); rs.Spec.Template.Spec.Containers[0].Image != "registry.k8s.io/pause:3.8" {
		t.Errorf("after resume the new ReplicaSet runs %s", rs.Spec.Template.Spec.Containers[0].Image)
	}

	k.ok("", "-n", ns, "rollout", "restart", "deployment/web")
	status()
	d = getDeployment(t, cs, ns, "web")
	if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
		t.Errorf("restart did not annotate the template: %v", d.Spec.Template.Annotations)
	}
	rs := newReplicaSet(t, cs, d)
	for _, p := range podsOf(t, cs, ns, "app=web") {
		if p.DeletionTimestamp == nil && metav1.GetControllerOf(&p).Name != rs.Name {
			t.Errorf("pod %s of %s survived the restart", p.Name, metav1.GetControllerOf(&p).Name)
		}
	}

	k.ok("", "-n", ns, "scale", "deployment/web", "--replicas=5")
	status()
	checkComplete(t, getDeployment(t, cs, ns, "web"), 5)
	eventually(t, 60*time.Second, func() error {
		if n := live(podsOf(t, cs, ns, "app=web")); n != 5 {
			return fmt.Errorf("%d live pods, want 5", n)
		}
		return nil
	})
}

func getDeployment(t *testing.T, cs kubernetes.Interface, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkComplete checks a rolled-out Deployment's status as upstream writes it.
func checkComplete(t *testing.T, d *appsv1.Deployment, replicas int32) {
	t.Helper()
	s := d.Status
	if s.ObservedGeneration != d.Generation || s.Replicas != replicas || s.UpdatedReplicas != replicas || s.ReadyReplicas != replicas || s.AvailableReplicas != replicas || s.UnavailableReplicas != 0 {
		t.Errorf("Deployment %s status %+v, want %d replicas all updated, ready and available at generation %d", d.Name, s, replicas, d.Generation)
	}
	if c := condition(d, appsv1.DeploymentAvailable); c == nil || c.Status != "True" || c.Reason != "MinimumReplicasAvailable" {
		t.Errorf("Available = %+v, want True MinimumReplicasAvailable", c)
	}
	if c := condition(d, appsv1.DeploymentProgressing); c == nil || c.Status != "True" || c.Reason != "NewReplicaSetAvailable" {
		t.Errorf("Progressing = %+v, want True NewReplicaSetAvailable", c)
	}
}

func condition(d *appsv1.Deployment, ct appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == ct {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func replicaSets(t *testing.T, cs kubernetes.Interface, ns string) []appsv1.ReplicaSet {
	t.Helper()
	l, err := cs.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// newReplicaSet is the Deployment's ReplicaSet at its current revision.
func newReplicaSet(t *testing.T, cs kubernetes.Interface, d *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	rev := d.Annotations["deployment.kubernetes.io/revision"]
	for _, rs := range replicaSets(t, cs, d.Namespace) {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID && rs.Annotations["deployment.kubernetes.io/revision"] == rev {
			return &rs
		}
	}
	t.Fatalf("no ReplicaSet of %s at revision %s", d.Name, rev)
	return nil
}

// historyRevisions reads the REVISION column of kubectl rollout history.
func historyRevisions(out string) []string {
	var revs []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] != "" && f[0][0] >= '0' && f[0][0] <= '9' {
			revs = append(revs, f[0])
		}
	}
	return revs
}
