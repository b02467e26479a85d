package agent

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestDrainMovesPods: a Deployment spread over the server's agent and a second agent
// (its own process, data dir and containerd); `kubectl drain --ignore-daemonsets
// --delete-emptydir-data` of the second node evicts its pods, and the Deployment's pods
// are recreated and Running on the first.
func TestDrainMovesPods(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	node := nodeName + "-drain"
	cidr, br := agentSlot(3)
	startAgentProcessWith(t, node, cidr, br, []string{"--kubeconfig", nodeKubeconfig(t, node)})
	// The deadline starts once the binary is linked (minutes on a loaded machine).
	ctx := ctxT(t, 5*time.Minute)
	waitNode(t, cs, node, 2*time.Minute, "Ready", nodeReady)

	labels := map[string]string{"app": "spread"}
	tmpl := busyboxPod("", "", "exec sleep 100000")
	tmpl.Spec.NodeName = ""
	tmpl.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	tmpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	// Only these two nodes, evenly; a cordoned node is no longer a domain (Honor).
	tmpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName, node}}}}}}}}
	honor := corev1.NodeInclusionPolicyHonor
	tmpl.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, NodeTaintsPolicy: &honor}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "spread"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// perNode counts the Deployment's Running pods by node (pods being deleted aside).
	perNode := func() (map[string]int, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=spread"})
		if err != nil {
			return nil, err
		}
		out := map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				out[p.Spec.NodeName]++
			}
		}
		return out, nil
	}
	servertest.Eventually(t, 2*time.Minute, time.Second, func() error {
		n, err := perNode()
		if err != nil {
			return err
		}
		if n[nodeName] != 2 || n[node] != 2 {
			return fmt.Errorf("running pods by node %v, want 2 on each of %s and %s", n, nodeName, node)
		}
		return nil
	})

	k := newKubectl(t, "1.33")
	out, errOut, err := k.run("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "2m")
	if err != nil {
		t.Fatalf("kubectl drain: %v\n%s\n%s", err, out, errOut)
	}
	servertest.Eventually(t, 2*time.Minute, time.Second, func() error {
		n, err := perNode()
		if err != nil {
			return err
		}
		if n[nodeName] != 4 || n[node] != 0 {
			return fmt.Errorf("running pods by node %v, want all 4 on %s", n, nodeName)
		}
		return nil
	})
	got, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil || !got.Spec.Unschedulable {
		t.Errorf("drained node: unschedulable %v, %v", got.Spec.Unschedulable, err)
	}
}
