package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

var zones3 = []string{"zone-a", "zone-b", "zone-c"}

// compareNodes is the 50-node cluster of the comparison (as test/scheduler's).
func compareNodes() []*corev1.Node {
	var out []*corev1.Node
	for i := range 50 {
		labels, cpu := map[string]string{}, "4"
		var taints []corev1.Taint
		switch i {
		case 0:
			labels["disk"] = "ssd"
		case 1:
			labels["tier"] = "gold"
		case 2, 4:
			labels["gpu"] = "true" // n-02 in zone-c, n-04 in zone-b
		case 3:
			labels["role"] = "infra"
			taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
		case 7, 10:
			labels["pair"] = "yes"
		case 8, 9, 11:
			labels["anti"] = "yes"
		case 12:
			labels["preempt"] = "yes"
			cpu = "2"
		case 13:
			labels["pack"] = "yes"
		case 16:
			labels["pack"] = "yes"
			cpu = "8"
		case 14:
			cpu = "32"
		case 17, 18:
			labels["pdb"] = "yes"
			cpu = "2"
		case 19:
			labels["vol"] = "yes"
			cpu = "2"
		case 20:
			labels["vol"] = "yes"
			cpu = "8"
		}
		out = append(out, node(fmt.Sprintf("n-%02d", i), zones3[i%3], cpu, "16Gi", labels, taints))
	}
	return out
}

// step creates pods and says what to compare: outcome turns the pods' nodes (or
// unschedulable messages) into the scheduler-independent answer.
type step struct {
	name    string
	pods    []*corev1.Pod
	outcome func(got []string) string
	before  func(ctx context.Context, cs kubernetes.Interface) error // objects the step's pods need
}

func withSel(p *corev1.Pod, k, v string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{k: v}
	return p
}

func exact(got []string) string { return strings.Join(got, " | ") }

// distinct: how many pods landed, on how many different nodes, and the messages of the
// rest.
func distinct(got []string) string {
	nodes, msgs := map[string]bool{}, []string{}
	for _, g := range got {
		if strings.HasPrefix(g, "n-") {
			nodes[g] = true
		} else {
			msgs = append(msgs, g)
		}
	}
	return fmt.Sprintf("%d distinct nodes; %s", len(nodes), strings.Join(msgs, " | "))
}

func perZone(got []string) string {
	c := map[string]int{}
	for _, g := range got {
		var i int
		fmt.Sscanf(g, "n-%d", &i)
		c[zones3[i%3]]++
	}
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s=%d", z, c[z]))
	}
	return strings.Join(parts, ",")
}

func steps() []step {
	pod := func(name string) *corev1.Pod {
		p := pausePod("cmp", name)
		p.Labels = map[string]string{"app": name}
		return p
	}
	var s []step
	s = append(s, step{name: "nodeSelector", pods: []*corev1.Pod{withSel(pod("selector"), "disk", "ssd")}, outcome: exact})
	req := pod("required")
	req.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
			{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}}}}}}}
	s = append(s, step{name: "required node affinity", pods: []*corev1.Pod{req}, outcome: exact})
	pref := pod("preferred")
	pref.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"gold"}}}}}}}}
	s = append(s, step{name: "preferred node affinity", pods: []*corev1.Pod{pref}, outcome: exact})
	tol := withSel(pod("tolerates"), "role", "infra")
	tol.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	s = append(s, step{name: "taint tolerated / not tolerated", pods: []*corev1.Pod{tol, withSel(pod("intolerant"), "role", "infra")}, outcome: exact})
	var hp []*corev1.Pod
	for i := range 3 {
		p := withSel(pod(fmt.Sprintf("web-%d", i)), "pair", "yes")
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		hp = append(hp, p)
	}
	s = append(s, step{name: "host ports", pods: hp, outcome: distinct})
	var sp []*corev1.Pod
	for i := range 6 {
		p := pod(fmt.Sprintf("spread-%d", i))
		p.Labels = map[string]string{"app": "spread"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		sp = append(sp, p)
	}
	s = append(s, step{name: "topology spread maxSkew 1 over zones", pods: sp, outcome: perZone})
	var an []*corev1.Pod
	for i := range 4 {
		p := withSel(pod(fmt.Sprintf("anti-%d", i)), "anti", "yes")
		p.Labels = map[string]string{"app": "anti"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "anti"}}}}}}
		an = append(an, p)
	}
	s = append(s, step{name: "required pod anti-affinity", pods: an, outcome: distinct})
	large := pod("large")
	large.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("30")
	huge := pod("huge")
	huge.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("40")
	s = append(s, step{name: "requests that fit only some nodes", pods: []*corev1.Pod{large, huge}, outcome: exact})
	least := withSel(pod("least"), "pack", "yes")
	least.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	s = append(s, step{name: "LeastAllocated scoring", pods: []*corev1.Pod{least}, outcome: exact})
	low := withSel(pod("low"), "preempt", "yes")
	low.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	s = append(s, step{name: "low-priority pod", pods: []*corev1.Pod{low}, outcome: exact})
	high := withSel(pod("high"), "preempt", "yes")
	high.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	high.Spec.PriorityClassName = "cmp-high"
	s = append(s, step{name: "priority preemption", pods: []*corev1.Pod{high}, outcome: exact})

	// VolumeBinding: a WaitForFirstConsumer claim whose only matching local volume is on
	// n-19 (2 CPUs) sends the pod there, not to the emptier n-20 (8 CPUs).
	wffc := withSel(pod("uses-wffc"), "vol", "yes")
	wffc.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "wffc"}}}}
	s = append(s, step{name: "WaitForFirstConsumer claim, local volume", pods: []*corev1.Pod{wffc}, outcome: exact, before: wffcObjects})

	// DefaultPreemption with a PodDisruptionBudget: n-17's one victim is protected, n-18
	// needs two unprotected victims; fewest PDB violations comes first, so n-18.
	guarded := withSel(pod("guarded"), "kubernetes.io/hostname", "n-17")
	guarded.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	var freePods []*corev1.Pod
	for _, n := range []string{"free-a", "free-b"} {
		p := withSel(pod(n), "kubernetes.io/hostname", "n-18")
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("750m")
		freePods = append(freePods, p)
	}
	s = append(s, step{name: "PDB victims and free victims", pods: append([]*corev1.Pod{guarded}, freePods...), outcome: exact, before: guardedPDB})
	pre := withSel(pod("pdb-preemptor"), "pdb", "yes")
	pre.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	pre.Spec.PriorityClassName = "cmp-high"
	s = append(s, step{name: "preemption minimising PDB violations", pods: []*corev1.Pod{pre}, outcome: exact})
	return s
}

func wffcObjects(ctx context.Context, cs kubernetes.Interface) error {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "cmp-wffc"},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &mode}, metav1.CreateOptions{}); err != nil {
		return err
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "cmp-local"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "cmp-wffc",
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/cmp"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"n-19"}}}}}}}}}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return err
	}
	class := "cmp-wffc"
	_, err := cs.CoreV1().PersistentVolumeClaims("cmp").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "wffc"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	return err
}

func guardedPDB(ctx context.Context, cs kubernetes.Interface) error {
	one := intstr.FromInt32(1)
	_, err := cs.PolicyV1().PodDisruptionBudgets("cmp").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}, metav1.CreateOptions{})
	return err
}

func compare(dir string) error {
	results := map[string][][]string{}
	for i, who := range []string{"kube", "peer"} {
		got, err := compareOne(filepath.Join(dir, who), 17443+i, who)
		if err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		results[who] = got
	}
	diff := false
	for i, st := range steps() {
		k, p := st.outcome(results["kube"][i]), st.outcome(results["peer"][i])
		mark := "same"
		if k != p {
			mark, diff = "DIFFERENT", true
		}
		fmt.Printf("%-40s %s\n  kube:           %s\n  kube-scheduler: %s\n", st.name, mark, k, p)
	}
	if diff {
		return fmt.Errorf("placements differ")
	}
	fmt.Println("all placements and messages equal")
	return nil
}

func compareOne(dir string, port int, who string) ([][]string, error) {
	s, err := startServer(dir, port, who == "kube")
	if err != nil {
		return nil, err
	}
	defer s.proc.stop()
	if who == "peer" {
		peer, err := startPeer(s, s.kubeconfig())
		if err != nil {
			return nil, err
		}
		defer peer.stop()
	}
	ctx := context.Background()
	cs := s.cs
	for _, n := range compareNodes() {
		if err := createNode(ctx, cs, n); err != nil {
			return nil, err
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cmp"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "cmp-high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var out [][]string
	for _, st := range steps() {
		if st.before != nil {
			if err := st.before(ctx, cs); err != nil {
				return nil, fmt.Errorf("%s: %w", st.name, err)
			}
		}
		var got []string
		for _, p := range st.pods {
			if _, err := cs.CoreV1().Pods("cmp").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			g, err := outcomeOf(ctx, cs, p.Name)
			if err != nil {
				return nil, err
			}
			got = append(got, g)
		}
		fmt.Printf("%s: %s: %s\n", who, st.name, strings.Join(got, " | "))
		out = append(out, got)
	}
	return out, nil
}

// outcomeOf waits until the pod is bound (its node) or unschedulable (its message). A
// preemption victim's graceful deletion is finished here, as a kubelet would.
func outcomeOf(ctx context.Context, cs kubernetes.Interface, name string) (string, error) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods("cmp").List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				_ = cs.CoreV1().Pods("cmp").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		}
		p, err := cs.CoreV1().Pods("cmp").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "deleted", nil
		}
		if err != nil {
			return "", err
		}
		if p.Spec.NodeName != "" {
			return p.Spec.NodeName, nil
		}
		for _, c := range p.Status.Conditions {
			// A preemptor waits for its victims: not a final answer.
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable && p.Status.NominatedNodeName == "" && p.Spec.PriorityClassName == "" {
				return c.Message, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("pod %s: no outcome within 90 s", name)
}
