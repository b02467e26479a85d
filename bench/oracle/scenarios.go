package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// peerBinDir is -peer-bin (its kubectl is the one scenarios run).
var peerBinDir string

// scenarios in the order the issue lists them.
func scenarios() []*scenario {
	return []*scenario{
		{name: "deployment", kinds: []kind{kDeploy, kRS, kPod}, run: scDeployment},
		{name: "rollout", kinds: []kind{kDeploy, kRS, kPod}, run: scRollout},
		{name: "recreate", kinds: []kind{kDeploy, kRS, kPod}, run: scRecreate},
		{name: "proportional", kinds: []kind{kDeploy, kRS, kPod}, run: scProportional},
		{name: "replicaset", kinds: []kind{kRS, kPod}, run: scReplicaSet},
		{name: "replicationcontroller", kinds: []kind{kRC, kPod}, run: scReplicationController},
		{name: "statefulset", kinds: []kind{kSTS, kCR, kPod, kService}, run: scStatefulSet},
		{name: "stsvolumes", kinds: []kind{kSTS, kCR, kPod, kPVC, kPV}, cluster: []string{"o-sts-pv-1g", "o-sts-pv-2g"}, run: scStatefulSetVolumes},
		{name: "daemonset", kinds: []kind{kDS, kCR, kPod}, keepNodes: true, run: scDaemonSet},
		{name: "dsrolling", kinds: []kind{kDS, kCR, kPod}, keepNodes: true, run: scDaemonSetRolling},
		{name: "job", kinds: []kind{kJob, kPod}, run: scJob},
		{name: "joblifecycle", kinds: []kind{kJob, kPod}, run: scJobLifecycle},
		{name: "cronjob", kinds: []kind{kCronJob, kJob, kPod}, run: scCronJob},
		{name: "endpointslice", kinds: []kind{kService, kSlice, kEndpoints, kPod}, run: scEndpointSlice},
		{name: "mirroring", kinds: []kind{kService, kSlice, kEndpoints}, run: scMirroring},
		{name: "pdb", kinds: []kind{kPDB, kDeploy, kPod}, run: scPDB},
		{name: "hpa", kinds: []kind{kHPA, kDeploy, kRS, kPod}, run: scHPA},
		{name: "pvbinding", kinds: []kind{kPVC, kPV}, cluster: []string{"o-pv-large", "o-pv-small"}, run: scPVBinding},
		{name: "ttlafterfinished", kinds: []kind{kJob, kPod}, run: scTTL},
		{name: "garbagecollector", kinds: []kind{kConfigMap, kDeploy, kRS, kPod}, run: scGC},
		{name: "namespace", kinds: []kind{kNamespace, kConfigMap}, cluster: []string{"o-namespace"}, run: scNamespace},
		{name: "serviceaccount", kinds: []kind{kSA, kConfigMap}, run: scServiceAccount},
		{name: "resourcequota", kinds: []kind{kQuota, kConfigMap, kPod}, run: scResourceQuota},
		// Last: it takes a node away for a while.
		{name: "nodelifecycle", kinds: []kind{kDeploy, kPod}, keepNodes: true, nodes: []string{"sim-3"}, run: scNodeLifecycle},
	}
}

// Deployment: create 5 replicas, RollingUpdate (maxSurge 1, maxUnavailable 0) to a new
// image, then `kubectl rollout undo`.
func scDeployment(ctx context.Context, e *env) error {
	if _, err := e.s.cs.AppsV1().Deployments(e.ns).Create(ctx, deployment("web", 5, "registry.example/web:v1"), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "web", 1); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "created"); err != nil {
		return err
	}
	gen, err := e.updateDeployment(ctx, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:v2" })
	if err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "web", gen); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "rolled"); err != nil {
		return err
	}
	out, err := e.kubectl(ctx, peerBinDir, "rollout", "undo", "deployment/web")
	e.calls = append(e.calls, "kubectl rollout undo: "+out)
	if err != nil {
		return err
	}
	if err := e.deploymentDone(ctx, "web", gen+1); err != nil {
		return err
	}
	return e.checkpoint(ctx, "undone")
}

// ReplicaSet: 3 replicas; one pod deleted; the ReplicaSet heals.
func scReplicaSet(ctx context.Context, e *env) error {
	lbl := map[string]string{"app": "heal"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "heal"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: template(lbl, nil, "registry.example/web:v1")},
	}
	if _, err := e.s.cs.AppsV1().ReplicaSets(e.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return err
	}
	settled := func(ctx context.Context) (bool, error) {
		rs, err := e.s.cs.AppsV1().ReplicaSets(e.ns).Get(ctx, "heal", metav1.GetOptions{})
		if err != nil || rs.Status.ObservedGeneration < rs.Generation || rs.Status.AvailableReplicas != 3 || rs.Status.ReadyReplicas != 3 || rs.Status.Replicas != 3 {
			return false, nil
		}
		return e.podsSettled(ctx, labels.SelectorFromSet(lbl), 3)
	}
	if err := e.until(ctx, 2*time.Minute, "ReplicaSet heal ready", settled); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "created"); err != nil {
		return err
	}
	pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	victim := pl.Items[0].Name
	e.call("delete pod", e.s.cs.CoreV1().Pods(e.ns).Delete(ctx, victim, metav1.DeleteOptions{}))
	if err := e.until(ctx, 2*time.Minute, "pod "+victim+" gone", func(ctx context.Context) (bool, error) {
		_, err := e.s.cs.CoreV1().Pods(e.ns).Get(ctx, victim, metav1.GetOptions{})
		return err != nil, nil
	}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "ReplicaSet heal healed", settled); err != nil {
		return err
	}
	return e.checkpoint(ctx, "healed")
}

// StatefulSet: OrderedReady, 3 replicas; RollingUpdate with partition 1 (web-2 then web-1
// updated), then partition 0 (web-0).
func scStatefulSet(ctx context.Context, e *env) error {
	lbl := map[string]string{"app": "web"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: lbl, Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
	}}
	if _, err := e.s.cs.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr(int32(3)), ServiceName: "web", Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: template(lbl, nil, "registry.example/web:v1"), PodManagementPolicy: appsv1.OrderedReadyPodManagement,
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(1))}},
	}}
	if _, err := e.s.cs.AppsV1().StatefulSets(e.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return err
	}
	wait := func(what string, updated int32, rolled bool) error {
		return e.until(ctx, 3*time.Minute, what, func(ctx context.Context) (bool, error) {
			s, err := e.s.cs.AppsV1().StatefulSets(e.ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil || s.Status.ObservedGeneration < s.Generation || s.Status.ReadyReplicas != 3 || s.Status.AvailableReplicas != 3 || s.Status.UpdatedReplicas != updated {
				return false, nil
			}
			if rolled != (s.Status.CurrentRevision == s.Status.UpdateRevision) {
				return false, nil
			}
			return e.podsSettled(ctx, labels.SelectorFromSet(lbl), 3)
		})
	}
	if err := wait("StatefulSet web created", 3, true); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "created"); err != nil {
		return err
	}
	update := func(f func(*appsv1.StatefulSet)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := e.s.cs.AppsV1().StatefulSets(e.ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			f(s)
			_, err = e.s.cs.AppsV1().StatefulSets(e.ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
	}
	if err := update(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "registry.example/web:v2" }); err != nil {
		return err
	}
	if err := wait("StatefulSet web partitioned", 2, false); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "partitioned"); err != nil {
		return err
	}
	if err := update(func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr(int32(0)) }); err != nil {
		return err
	}
	if err := wait("StatefulSet web rolled", 3, true); err != nil {
		return err
	}
	return e.checkpoint(ctx, "rolled")
}

// DaemonSet: sim-3 tainted NoSchedule → pods on sim-1 and sim-2; the taint removed → sim-3 too.
func scDaemonSet(ctx context.Context, e *env) error {
	taint := func(on bool) error {
		patch := `{"spec":{"taints":null}}`
		if on {
			patch = `{"spec":{"taints":[{"key":"oracle.kubeos.dev/dedicated","value":"x","effect":"NoSchedule"}]}}`
		}
		_, err := e.s.cs.CoreV1().Nodes().Patch(ctx, "sim-3", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := taint(true); err != nil {
		return err
	}
	defer func() { _ = taint(false) }()
	lbl := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: template(lbl, nil, "registry.example/agent:v1"),
	}}
	if _, err := e.s.cs.AppsV1().DaemonSets(e.ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return err
	}
	wait := func(what string, n int32) error {
		return e.until(ctx, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
			d, err := e.s.cs.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
			st := d.Status
			if err != nil || st.ObservedGeneration < d.Generation || st.DesiredNumberScheduled != n || st.NumberReady != n || st.NumberAvailable != n || st.UpdatedNumberScheduled != n || st.CurrentNumberScheduled != n {
				return false, nil
			}
			return e.podsSettled(ctx, labels.SelectorFromSet(lbl), int(n))
		})
	}
	if err := wait("DaemonSet agent on 2 nodes", 2); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "tainted"); err != nil {
		return err
	}
	if err := taint(false); err != nil {
		return err
	}
	if err := wait("DaemonSet agent on 3 nodes", 3); err != nil {
		return err
	}
	return e.checkpoint(ctx, "untainted")
}

// Job: Indexed, completions 5, parallelism 5, backoffLimitPerIndex 1, a podFailurePolicy
// that fails an index on exit code 42; index 2 exits 42, index 3 exits 1 (retried once).
func scJob(ctx context.Context, e *env) error {
	tpl := template(map[string]string{"app": "batch"}, map[string]string{"oracle.kubeos.dev/fail": "true", "sim.kubeos.dev/run-time": "2s"}, "registry.example/batch:v1")
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Spec: batchv1.JobSpec{
		Completions: ptr(int32(5)), Parallelism: ptr(int32(5)), CompletionMode: ptr(batchv1.IndexedCompletion),
		BackoffLimitPerIndex: ptr(int32(1)), Template: tpl,
		PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
		}}},
	}}
	if _, err := e.s.cs.BatchV1().Jobs(e.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 3*time.Minute, "Job batch finished", func(ctx context.Context) (bool, error) {
		j, err := e.s.cs.BatchV1().Jobs(e.ns).Get(ctx, "batch", metav1.GetOptions{})
		if err != nil || j.Status.CompletionTime == nil && !jobCond(j, batchv1.JobFailed) || j.Status.Active != 0 || ptrVal(j.Status.Terminating) != 0 {
			return false, nil
		}
		pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pl.Items {
			if len(p.Finalizers) > 0 {
				return false, nil // the job-tracking finalizer: not yet accounted
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "finished")
}

func jobCond(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func ptrVal[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// ServiceAccount and root CA: a new namespace gets its default ServiceAccount and the
// kube-root-ca.crt ConfigMap.
func scServiceAccount(ctx context.Context, e *env) error {
	if err := e.until(ctx, time.Minute, "kube-root-ca.crt", func(ctx context.Context) (bool, error) {
		_, err := e.s.cs.CoreV1().ConfigMaps(e.ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "created")
}

// ResourceQuota: status.hard and status.used as the quota controller counts them, and the
// answers of creates beyond the quota.
func scResourceQuota(ctx context.Context, e *env) error {
	if err := scServiceAccount(ctx, e); err != nil { // kube-root-ca.crt is counted
		return err
	}
	e.cps = nil
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("2"), "configmaps": resource.MustParse("3"),
		corev1.ResourceRequestsCPU: resource.MustParse("1"), "count/deployments.apps": resource.MustParse("1"),
	}}}
	if _, err := e.s.cs.CoreV1().ResourceQuotas(e.ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		return err
	}
	used := func(what string, want map[corev1.ResourceName]string) error {
		return e.until(ctx, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
			q, err := e.s.cs.CoreV1().ResourceQuotas(e.ns).Get(ctx, "q", metav1.GetOptions{})
			if err != nil || len(q.Status.Hard) != 4 {
				return false, nil
			}
			for k, v := range want {
				u, ok := q.Status.Used[k]
				if !ok || u.Cmp(resource.MustParse(v)) != 0 {
					return false, nil
				}
			}
			return true, nil
		})
	}
	if err := used("quota q counted", map[corev1.ResourceName]string{"configmaps": "1", "pods": "0"}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "counted"); err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}, Spec: template(nil, nil, "registry.example/web:v1").Spec}
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}
		_, err := e.s.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{})
		e.call("create pod "+p.Name, err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "norequests"}, Spec: template(nil, nil, "registry.example/web:v1").Spec}
	_, err := e.s.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{})
	e.call("create pod without requests", err)
	for i := 1; i <= 3; i++ {
		_, err := e.s.cs.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{})
		e.call(fmt.Sprintf("create configmap c%d", i), err)
	}
	if err := used("quota q full", map[corev1.ResourceName]string{"configmaps": "3", "pods": "2", "requests.cpu": "600m"}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "pods p1 p2 running", func(ctx context.Context) (bool, error) {
		return e.podsSettled(ctx, labels.Everything(), 2)
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "full")
}
