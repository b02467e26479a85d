package apps

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestDaemonSetNodes: a DaemonSet with a nodeSelector runs one pod on each labelled node
// except one whose NoSchedule taint it does not tolerate; removing the taint adds the pod
// there, and a template change rolls every pod.
func TestDaemonSetNodes(t *testing.T) {
	appsSuite.Need(t)
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs, "daemonset")
	dumpOnFailure(t, ns)
	ctx := ctxT(t, 3*time.Minute)
	const label = "apps.test/daemonset"
	nodes := []string{"sim-1", "sim-2", "sim-3"}
	patchNode := func(name, patch string) {
		t.Helper()
		if _, err := cs.CoreV1().Nodes().Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// sim-3 tainted: its pods must tolerate apps.test/daemonset=no:NoSchedule. Tainted before
	// the nodes get the selector's label, so that no view of sim-3 the controller's informer
	// can hold makes it eligible without its taint (it would get a pod that never schedules).
	node, err := cs.CoreV1().Nodes().Get(ctx, "sim-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	untainted := node.Spec.Taints
	node.Spec.Taints = append(slices.Clone(untainted), corev1Taint(label, "no"))
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the taint goes even when the test fails before it removes it
		bg := context.Background()
		n, err := cs.CoreV1().Nodes().Get(bg, "sim-3", metav1.GetOptions{})
		if err != nil {
			return
		}
		kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(tt corev1.Taint) bool { return tt.Key == label })
		if len(kept) != len(n.Spec.Taints) {
			n.Spec.Taints = kept
			_, _ = cs.CoreV1().Nodes().Update(bg, n, metav1.UpdateOptions{})
		}
	})
	for _, n := range nodes {
		patchNode(n, `{"metadata":{"labels":{"`+label+`":"yes"}}}`)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			patchNode(n, `{"metadata":{"labels":{"`+label+`":null}}}`)
		}
	})

	l := map[string]string{"app": "agent"}
	tmpl := podTemplate(l)
	tmpl.Spec.NodeSelector = map[string]string{label: "yes"}
	ds, err := cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onNodes := func(want ...string) {
		t.Helper()
		pods := ownedReady(t, cs, ns, "app=agent", ds.UID, len(want))
		var got []string
		for _, p := range pods {
			got = append(got, p.Spec.NodeName)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("daemon pods on %v, want %v", got, want)
		}
		eventually(t, 30*time.Second, func() error {
			d, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			n := int32(len(want))
			if s := d.Status; s.DesiredNumberScheduled != n || s.CurrentNumberScheduled != n || s.NumberReady != n || s.NumberAvailable != n || s.UpdatedNumberScheduled != n || s.NumberMisscheduled != 0 || s.ObservedGeneration != d.Generation {
				return fmt.Errorf("status %+v, want %d everywhere", s, n)
			}
			return nil
		})
	}
	onNodes("sim-1", "sim-2")

	node, err = cs.CoreV1().Nodes().Get(ctx, "sim-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = untainted
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	onNodes("sim-1", "sim-2", "sim-3")

	// Rolling update: every pod replaced by one of the new template.
	old := map[string]bool{}
	for _, p := range podsOf(t, cs, ns, "app=agent") {
		old[p.Name] = true
	}
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}}}}`
	if _, err := cs.AppsV1().DaemonSets(ns).Patch(ctx, "agent", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() error {
		pods := podsOf(t, cs, ns, "app=agent")
		if live(pods) != 3 {
			return fmt.Errorf("%d live pods", live(pods))
		}
		for _, p := range pods {
			if old[p.Name] || p.Spec.Containers[0].Image != "registry.k8s.io/pause:3.10" || !podReady(&p) {
				return fmt.Errorf("pod %s not yet replaced and ready", p.Name)
			}
		}
		return nil
	})
	onNodes("sim-1", "sim-2", "sim-3")
}
