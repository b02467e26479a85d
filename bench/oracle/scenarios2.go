package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EndpointSlice: a Service with a named target port over two ready pods, one that never
// becomes ready, and one that stays Ready for 20 s after its deletion (terminating).
func scEndpointSlice(ctx context.Context, e *env) error {
	lbl := map[string]string{"app": "ep"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromString("web-port")},
		{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)},
	}}}
	if _, err := e.s.cs.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, func() *appsv1.Deployment {
		d := deployment("ep", 2, "registry.example/web:v1")
		d.Spec.Selector.MatchLabels, d.Spec.Template.Labels = lbl, lbl
		return d
	}(), metav1.CreateOptions{}); err != nil {
		return err
	}
	pod := func(name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, Annotations: ann}, Spec: template(nil, nil, "registry.example/web:v1").Spec}
	}
	for _, p := range []*corev1.Pod{pod("unready", map[string]string{"oracle.kubeos.dev/ready": "false"}), pod("stopping", map[string]string{"oracle.kubeos.dev/slow-stop": "true"})} {
		if _, err := e.s.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// endpoints: the Service's slices' endpoints by pod name.
	endpoints := func(ctx context.Context) (map[string]discoveryv1.EndpointConditions, bool) {
		l, err := e.s.cs.DiscoveryV1().EndpointSlices(e.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return nil, false
		}
		m := map[string]discoveryv1.EndpointConditions{}
		for _, s := range l.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil {
					m[ep.TargetRef.Name] = ep.Conditions
				}
			}
		}
		return m, true
	}
	if err := e.until(ctx, 2*time.Minute, "3 endpoints, 2 ready", func(ctx context.Context) (bool, error) {
		m, ok := endpoints(ctx)
		if !ok || len(m) != 4 {
			return false, nil
		}
		ready := 0
		for _, c := range m {
			if ptrVal(c.Ready) {
				ready++
			}
		}
		ep, err := e.s.cs.CoreV1().Endpoints(e.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) != 3 || len(ep.Subsets[0].NotReadyAddresses) != 1 {
			return false, nil
		}
		return ready == 3, nil
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "ready"); err != nil {
		return err
	}
	e.call("delete pod stopping", e.s.cs.CoreV1().Pods(e.ns).Delete(ctx, "stopping", metav1.DeleteOptions{}))
	if err := e.until(ctx, time.Minute, "stopping terminating", func(ctx context.Context) (bool, error) {
		m, ok := endpoints(ctx)
		c, found := m["stopping"]
		return ok && found && ptrVal(c.Terminating) && len(m) == 4, nil
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "terminating"); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "stopping gone", func(ctx context.Context) (bool, error) {
		m, ok := endpoints(ctx)
		_, found := m["stopping"]
		if !ok || found || len(m) != 3 {
			return false, nil
		}
		if _, err := e.s.cs.CoreV1().Pods(e.ns).Get(ctx, "stopping", metav1.GetOptions{}); err == nil {
			return false, nil
		}
		ep, err := e.s.cs.CoreV1().Endpoints(e.ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 2, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "gone")
}

// PodDisruptionBudget: minAvailable 3 over 3 pods (an eviction is refused), then 4 pods
// (an eviction is granted).
func scPDB(ctx context.Context, e *env) error {
	d := deployment("guarded", 3, "registry.example/web:v1")
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	min3 := intstr.FromInt32(3)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: &min3, Selector: d.Spec.Selector,
	}}
	if _, err := e.s.cs.PolicyV1().PodDisruptionBudgets(e.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return err
	}
	budget := func(what string, healthy, allowed int32) error {
		return e.until(ctx, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
			p, err := e.s.cs.PolicyV1().PodDisruptionBudgets(e.ns).Get(ctx, "pdb", metav1.GetOptions{})
			if err != nil || p.Status.ObservedGeneration < p.Generation || p.Status.CurrentHealthy != healthy || p.Status.ExpectedPods != healthy || p.Status.DisruptionsAllowed != allowed || len(p.Status.DisruptedPods) != 0 {
				return false, nil
			}
			return e.podsSettled(ctx, labels.SelectorFromSet(d.Spec.Selector.MatchLabels), int(healthy))
		})
	}
	if err := e.deploymentDone(ctx, "guarded", 1); err != nil {
		return err
	}
	if err := budget("budget at 3 healthy, 0 allowed", 3, 0); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "blocked"); err != nil {
		return err
	}
	evict := func() error {
		pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		e.call("evict a pod", e.s.cs.PolicyV1().Evictions(e.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pl.Items[0].Name, Namespace: e.ns}}))
		return nil
	}
	if err := evict(); err != nil {
		return err
	}
	gen, err := e.updateDeployment(ctx, "guarded", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(4)) })
	if err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "guarded", gen); err != nil {
		return err
	}
	if err := budget("budget at 4 healthy, 1 allowed", 4, 1); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "allowed"); err != nil {
		return err
	}
	if err := evict(); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "guarded", gen); err != nil {
		return err
	}
	if err := budget("budget back at 4 healthy", 4, 1); err != nil {
		return err
	}
	return e.checkpoint(ctx, "evicted")
}

// CronJob: every minute, Forbid; suspended as soon as its first run is scheduled, so it
// runs exactly once.
func scCronJob(ctx context.Context, e *env) error {
	tpl := template(map[string]string{"app": "tick"}, map[string]string{"sim.kubeos.dev/run-time": "1s"}, "registry.example/tick:v1")
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "tick"}, Spec: batchv1.CronJobSpec{
		Schedule: "* * * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent,
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}},
	}}
	if _, err := e.s.cs.BatchV1().CronJobs(e.ns).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "first run scheduled", func(ctx context.Context) (bool, error) {
		c, err := e.s.cs.BatchV1().CronJobs(e.ns).Get(ctx, "tick", metav1.GetOptions{})
		return err == nil && c.Status.LastScheduleTime != nil, nil
	}); err != nil {
		return err
	}
	if _, err := e.s.cs.BatchV1().CronJobs(e.ns).Patch(ctx, "tick", types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "first run done", func(ctx context.Context) (bool, error) {
		c, err := e.s.cs.BatchV1().CronJobs(e.ns).Get(ctx, "tick", metav1.GetOptions{})
		if err != nil || c.Status.LastSuccessfulTime == nil || len(c.Status.Active) != 0 {
			return false, nil
		}
		jl, err := e.s.cs.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(jl.Items) != 1 || !jobCond(&jl.Items[0], batchv1.JobComplete) {
			return false, nil
		}
		pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pl.Items) == 1 && len(pl.Items[0].Finalizers) == 0, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "ran")
}

// Node lifecycle: two pods pinned to sim-3 that tolerate unreachable for 5 s; sim-3 stops
// heartbeating (Ready=Unknown, taints, eviction, the replacements unschedulable), then
// comes back (taints removed, pods scheduled).
func scNodeLifecycle(ctx context.Context, e *env) error {
	heartbeat := func(on bool) error {
		patch := `{"metadata":{"annotations":{"sim.kubeos.dev/heartbeat":"stopped"}}}`
		if on {
			patch = `{"metadata":{"annotations":{"sim.kubeos.dev/heartbeat":null}}}`
		}
		_, err := e.s.cs.CoreV1().Nodes().Patch(ctx, "sim-3", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	defer func() { _ = heartbeat(true) }()
	d := deployment("evac", 2, "registry.example/web:v1")
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "sim-3"}
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(5))},
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(5))},
	}
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "evac", 1); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "running"); err != nil {
		return err
	}
	pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if err := heartbeat(false); err != nil {
		return err
	}
	if err := e.until(ctx, 3*time.Minute, "sim-3 unreachable and its pods evicted, replacements pending", func(ctx context.Context) (bool, error) {
		n, err := e.s.cs.CoreV1().Nodes().Get(ctx, "sim-3", metav1.GetOptions{})
		if err != nil || nodeReady(n) || len(n.Spec.Taints) != 2 {
			return false, nil
		}
		// The evicted pods stay Terminating (their kubelet is gone); their replacements
		// cannot be scheduled (sim-3 is tainted, the others do not match).
		now, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(now.Items) != 4 {
			return false, nil
		}
		for _, p := range now.Items {
			old := false
			for _, o := range pl.Items {
				old = old || p.UID == o.UID
			}
			if old != (p.DeletionTimestamp != nil) {
				return false, nil
			}
			if !old && (p.Status.Phase != corev1.PodPending || len(p.Status.Conditions) == 0) {
				return false, nil
			}
		}
		d, err := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, "evac", metav1.GetOptions{})
		return err == nil && d.Status.Replicas == 2 && d.Status.UpdatedReplicas == 2 && d.Status.UnavailableReplicas == 2, nil
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "evacuated"); err != nil {
		return err
	}
	if err := heartbeat(true); err != nil {
		return err
	}
	if err := e.until(ctx, 3*time.Minute, "sim-3 back", func(ctx context.Context) (bool, error) {
		n, err := e.s.cs.CoreV1().Nodes().Get(ctx, "sim-3", metav1.GetOptions{})
		return err == nil && nodeReady(n) && len(n.Spec.Taints) == 0, nil
	}); err != nil {
		return err
	}
	// The old pods' kubelet finishes their deletion; the replacements run on sim-3.
	if err := e.deploymentDone(ctx, "evac", 1); err != nil {
		return err
	}
	return e.checkpoint(ctx, "returned")
}
