package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ReplicationController: 3 replicas, one pod deleted, healed.
func scReplicationController(ctx context.Context, e *env) error {
	lbl := map[string]string{"app": "legacy"}
	tpl := template(lbl, nil, "registry.example/web:v1")
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}, Spec: corev1.ReplicationControllerSpec{
		Replicas: ptr(int32(3)), Selector: lbl, Template: &tpl,
	}}
	if _, err := e.s.cs.CoreV1().ReplicationControllers(e.ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		return err
	}
	settled := func(ctx context.Context) (bool, error) {
		rc, err := e.s.cs.CoreV1().ReplicationControllers(e.ns).Get(ctx, "legacy", metav1.GetOptions{})
		if err != nil || rc.Status.ObservedGeneration < rc.Generation || rc.Status.AvailableReplicas != 3 || rc.Status.ReadyReplicas != 3 || rc.Status.Replicas != 3 {
			return false, nil
		}
		return e.podsSettled(ctx, labels.SelectorFromSet(lbl), 3)
	}
	if err := e.until(ctx, 2*time.Minute, "ReplicationController legacy ready", settled); err != nil {
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
	if err := e.until(ctx, 2*time.Minute, "ReplicationController legacy healed", settled); err != nil {
		return err
	}
	return e.checkpoint(ctx, "healed")
}

// EndpointSlice mirroring: a Service without a selector and its hand-written Endpoints.
func scMirroring(ctx context.Context, e *env) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "external"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	if _, err := e.s.cs.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "external", Labels: map[string]string{"team": "oracle"}}, Subsets: []corev1.EndpointSubset{{
		Addresses:         []corev1.EndpointAddress{{IP: "192.0.2.10"}, {IP: "192.0.2.11"}},
		NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.0.2.12"}},
		Ports:             []corev1.EndpointPort{{Name: "https", Port: 8443, Protocol: corev1.ProtocolTCP}},
	}}}
	if _, err := e.s.cs.CoreV1().Endpoints(e.ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "mirrored slice", func(ctx context.Context) (bool, error) {
		l, err := e.s.cs.DiscoveryV1().EndpointSlices(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && len(l.Items[0].Endpoints) == 3, nil
	}); err != nil {
		return err
	}
	return e.checkpoint(ctx, "mirrored")
}

// Job suspend and resume, and activeDeadlineSeconds.
func scJobLifecycle(ctx context.Context, e *env) error {
	tpl := func(runTime string) corev1.PodTemplateSpec {
		t := template(map[string]string{"app": "batch"}, map[string]string{"sim.kubeos.dev/run-time": runTime}, "registry.example/batch:v1")
		t.Spec.RestartPolicy = corev1.RestartPolicyNever
		return t
	}
	suspended := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Spec: batchv1.JobSpec{
		Suspend: ptr(true), Completions: ptr(int32(2)), Parallelism: ptr(int32(2)), Template: tpl("1s"),
	}}
	deadline := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Spec: batchv1.JobSpec{
		ActiveDeadlineSeconds: ptr(int64(3)), BackoffLimit: ptr(int32(0)), Template: tpl("10m"),
	}}
	for _, j := range []*batchv1.Job{suspended, deadline} {
		if _, err := e.s.cs.BatchV1().Jobs(e.ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	cond := func(name string, t batchv1.JobConditionType) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			j, err := e.s.cs.BatchV1().Jobs(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || !jobCond(j, t) || j.Status.Active != 0 || ptrVal(j.Status.Terminating) != 0 {
				return false, nil
			}
			pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
			if err != nil {
				return false, nil
			}
			for _, p := range pl.Items {
				if len(p.Finalizers) > 0 || p.DeletionTimestamp != nil {
					return false, nil
				}
			}
			return true, nil
		}
	}
	if err := e.until(ctx, 2*time.Minute, "Job later suspended, Job slow past its deadline", func(ctx context.Context) (bool, error) {
		a, _ := cond("later", batchv1.JobSuspended)(ctx)
		b, _ := cond("slow", batchv1.JobFailed)(ctx)
		return a && b, nil
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "suspended"); err != nil {
		return err
	}
	if _, err := e.s.cs.BatchV1().Jobs(e.ns).Patch(ctx, "later", types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := e.until(ctx, 2*time.Minute, "Job later complete", cond("later", batchv1.JobComplete)); err != nil {
		return err
	}
	return e.checkpoint(ctx, "resumed")
}

// Namespace deletion held by a finalizer: the namespace's conditions say what remains;
// the finalizer removed, it goes.
func scNamespace(ctx context.Context, e *env) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"oracle.kubeos.dev/hold"}}}
	if _, err := e.s.cs.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := e.s.cs.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	e.call("delete namespace", e.s.cs.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{}))
	if err := e.until(ctx, 2*time.Minute, "namespace held", func(ctx context.Context) (bool, error) {
		ns, err := e.s.cs.CoreV1().Namespaces().Get(ctx, e.ns, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, c := range ns.Status.Conditions {
			if (c.Type == corev1.NamespaceContentRemaining || c.Type == corev1.NamespaceFinalizersRemaining) && c.Status == corev1.ConditionTrue {
				n++
			}
		}
		_, serr := e.s.cs.CoreV1().Secrets(e.ns).Get(ctx, "plain", metav1.GetOptions{})
		return n == 2 && serr != nil, nil
	}); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "held"); err != nil {
		return err
	}
	if _, err := e.s.cs.CoreV1().ConfigMaps(e.ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	return e.until(ctx, 2*time.Minute, "namespace gone", func(ctx context.Context) (bool, error) {
		_, err := e.s.cs.CoreV1().Namespaces().Get(ctx, e.ns, metav1.GetOptions{})
		return err != nil, nil
	})
}

// DaemonSet RollingUpdate with maxSurge 1 (maxUnavailable 0): on each node the new pod
// comes before the old one goes.
func scDaemonSetRolling(ctx context.Context, e *env) error {
	lbl := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: template(lbl, nil, "registry.example/agent:v1"),
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(0)),
		}},
	}}
	if _, err := e.s.cs.AppsV1().DaemonSets(e.ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return err
	}
	wait := func(what string) error {
		return e.until(ctx, 3*time.Minute, what, func(ctx context.Context) (bool, error) {
			d, err := e.s.cs.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
			st := d.Status
			if err != nil || st.ObservedGeneration < d.Generation || st.DesiredNumberScheduled != simNodes || st.NumberReady != simNodes || st.NumberAvailable != simNodes || st.UpdatedNumberScheduled != simNodes {
				return false, nil
			}
			return e.podsSettled(ctx, labels.SelectorFromSet(lbl), simNodes)
		})
	}
	if err := wait("DaemonSet agent on every node"); err != nil {
		return err
	}
	if err := e.checkpoint(ctx, "created"); err != nil {
		return err
	}
	if _, err := e.s.cs.AppsV1().DaemonSets(e.ns).Patch(ctx, "agent", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/agent:v2"}]}}}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := wait("DaemonSet agent rolled"); err != nil {
		return err
	}
	return e.checkpoint(ctx, "rolled")
}
