package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestWebWithCache: alice applies a Cache (real Redis ACL user) and a Component that uses
// it with kubectl 1.33; the Component waits for the Cache, then runs a Deployment whose
// pods get every key of the connection Secret as SESSIONS_<KEY> from the Secret and a
// placeholder resolved through $(SESSIONS_URI), and a Service selecting all its tracks.
// A new image rolls the Deployment; deleting the Component removes what it created.
func TestWebWithCache(t *testing.T) {
	componentSuite.Need(t)
	dumpOnFailure(t, componentAdmin, acmeNS, &componentLog)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: web}
spec:
  image: busybox:1.36
  replicas: 2
  command: [httpd, -f]
  exposes: [{name: http, port: 8080}, {port: 9090}]
  uses: [{kind: Cache, name: sessions}]
  env:
  - {name: CACHE_URL, value: "${resources.sessions.uri}?prefix=${resources.sessions.keyPrefix}"}
  - {name: MODE, value: web}
---
apiVersion: kubeos.dev/v1alpha1
kind: Cache
metadata: {name: sessions}
spec: {}
`)
	c := waitComponent(t, "web", 90*time.Second, "Active", componentActive)
	if c.Status.ReadyReplicas != 2 || c.Status.Replicas != 2 || c.Status.Image != "busybox:1.36" || c.Status.Service != "web" ||
		c.Status.Workload == nil || c.Status.Workload.Kind != "Deployment" {
		t.Errorf("status %+v", c.Status)
	}
	if dr := componentCondition(c, "DependenciesReady"); dr == nil || dr.Status != "True" {
		t.Errorf("DependenciesReady %+v", dr)
	}
	var d appsv1.Deployment
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "web"}, &d); err != nil {
		t.Fatal(err)
	}
	if ref := d.OwnerReferences; len(ref) != 1 || ref[0].Kind != "Component" || ref[0].UID != c.UID || ref[0].Controller == nil || !*ref[0].Controller {
		t.Errorf("owner references %+v", ref)
	}
	for k, v := range map[string]string{"kubeos.dev/component": "web", "app.kubernetes.io/managed-by": "kube", "app.kubernetes.io/name": "web"} {
		if d.Labels[k] != v || d.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: deployment %q, pods %q; want %q", k, d.Labels[k], d.Spec.Template.Labels[k], v)
		}
	}
	if d.Spec.Template.Labels["kubeos.dev/track"] != "stable" {
		t.Errorf("pod template labels %v", d.Spec.Template.Labels)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		env[e.Name] = e
	}
	var cache v1alpha1.Cache
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "sessions"}, &cache); err != nil {
		t.Fatal(err)
	}
	var secret corev1.Secret
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: cache.Status.ConnectionSecret}, &secret); err != nil {
		t.Fatal(err)
	}
	for key := range secret.Data {
		name := "SESSIONS_" + strings.ToUpper(key)
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret.Name || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("env %s: %+v; want from Secret %s key %s", name, e, secret.Name, key)
		}
	}
	if got := env["CACHE_URL"].Value; got != "$(SESSIONS_URI)?prefix=$(SESSIONS_KEYPREFIX)" {
		t.Errorf("CACHE_URL %q", got)
	}
	if env["MODE"].Value != "web" {
		t.Errorf("MODE %+v", env["MODE"])
	}
	// The password is nowhere in the pod template in clear.
	if pw := string(secret.Data["password"]); pw == "" || strings.Contains(fmt.Sprint(d.Spec.Template), pw) {
		t.Errorf("password %q missing from the Secret or present in the pod template", pw)
	}
	var svc corev1.Service
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "web"}, &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Selector) != 1 || svc.Spec.Selector["kubeos.dev/component"] != "web" || svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == "" {
		t.Errorf("service selector %v type %s ip %q", svc.Spec.Selector, svc.Spec.Type, svc.Spec.ClusterIP)
	}
	if p := svc.Spec.Ports; len(p) != 2 || p[0].Name != "http" || p[0].Port != 8080 || p[0].TargetPort.IntValue() != 8080 || p[1].Name != "p9090" {
		t.Errorf("service ports %+v", p)
	}
	// kubectl get all -l finds what the Component made.
	out, errOut, err := alice(t, "", "-n", acmeNS, "get", "deployments,services,pods", "-l", "kubeos.dev/component=web", "-o", "name")
	if err != nil || !strings.Contains(out, "deployment.apps/web") || !strings.Contains(out, "service/web") || strings.Count(out, "pod/") != 2 {
		t.Errorf("kubectl get -l: %v %s\n%s", err, errOut, out)
	}

	// A new image (as a user or a Release patches it) rolls the Deployment.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "patch", "component", "web", "--type=merge", "-p", `{"spec":{"image":"busybox:1.37"}}`); err != nil {
		t.Fatalf("patch: %v %s", err, errOut)
	}
	c = waitComponent(t, "web", 90*time.Second, "Active with busybox:1.37", func(c *v1alpha1.Component) bool { return componentActive(c) && c.Status.Image == "busybox:1.37" })
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "web"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "busybox:1.37" || c.Status.UpdatedReplicas != 2 {
		t.Errorf("after the patch: deployment image %s, status %+v", d.Spec.Template.Spec.Containers[0].Image, c.Status)
	}

	// Drift: an edit of the Deployment by hand is put back.
	if err := componentAdmin.Patch(ctx, &appsv1.Deployment{ObjectMeta: d.ObjectMeta}, client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:hand-edited"}]}}}}`))); err != nil {
		t.Fatal(err)
	}
	// The edit changes the Deployment (Owns): the Component puts its image back.
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "web"}, &d); err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "busybox:1.37" {
			return fmt.Errorf("deployment image %s", img)
		}
		return nil
	})

	// Deleting the Component deletes the Deployment (after its pods: their grace periods, then
	// the foreground deletion of ReplicaSet and Deployment), the Service and itself. kubectl
	// does not wait (servertest.RunKubectl kills it after 60 s); the test does.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", "web", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s", err, errOut)
	}
	gone(t, &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: acmeNS, Name: "web"}}, 3*time.Minute)
	gone(t, &appsv1.Deployment{ObjectMeta: d.ObjectMeta}, 30*time.Second)
	gone(t, &corev1.Service{ObjectMeta: svc.ObjectMeta}, 30*time.Second)
	// The pods go with the foreground deletion, except any a ReplicaSet created while its
	// deletion began (the drift's rollout may still run): the garbage collector deletes those
	// as dependents of a gone owner, shortly after (seen in a CI run, 12-07: 2 left at once).
	servertest.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
		var pods corev1.PodList
		if err := componentAdmin.List(ctx, &pods, client.InNamespace(acmeNS), client.MatchingLabels{"kubeos.dev/component": "web"}); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("pods left after the Component went: %d", len(pods.Items))
		}
		return nil
	})
}

// TestMissingDatabase: a Component using a Database that does not exist waits with
// DependenciesReady=False naming it, and creates nothing.
func TestMissingDatabase(t *testing.T) {
	componentSuite.Need(t)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: orphan}
spec:
  image: busybox
  uses: [{kind: Database, name: nope}]
`)
	c := waitComponent(t, "orphan", 30*time.Second, "waiting for its Database", func(c *v1alpha1.Component) bool {
		dr := componentCondition(c, "DependenciesReady")
		return dr != nil && dr.Status == "False"
	})
	if dr := componentCondition(c, "DependenciesReady"); !strings.Contains(dr.Message, "Database") || !strings.Contains(dr.Message, "nope") {
		t.Errorf("DependenciesReady message %q does not name Database nope", dr.Message)
	}
	if c.Status.Phase != "Pending" {
		t.Errorf("phase %s, want Pending", c.Status.Phase)
	}
	var d appsv1.Deployment
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "orphan"}, &d); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("a Deployment exists for a Component whose Database is missing (err %v)", err)
	}
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", "orphan", "--timeout=60s"); err != nil {
		t.Fatalf("delete: %v %s", err, errOut)
	}
}

// TestCrashLoop: a Component whose pods crash-loop stays Reconciling with the pod's reason.
func TestCrashLoop(t *testing.T) {
	componentSuite.Need(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: `+crashComponent+`}
spec: {image: busybox, command: ["false"]}
`)
	c := waitComponent(t, crashComponent, 60*time.Second, "Reconciling with CrashLoopBackOff", func(c *v1alpha1.Component) bool {
		r := componentCondition(c, "Reconciling")
		return c.Status.Phase == "Reconciling" && r != nil && r.Reason == "CrashLoopBackOff"
	})
	if r := componentCondition(c, "Reconciling"); !strings.Contains(r.Message, "pod "+crashComponent+"-") || !strings.Contains(r.Message, "container main") {
		t.Errorf("message %q does not name the pod and container", r.Message)
	}
	if c.Status.ReadyReplicas != 0 || c.Status.Replicas != 1 {
		t.Errorf("status %+v", c.Status)
	}
	// Deletion does not wait on the crash loop.
	// kubectl does not wait (RunKubectl kills it after 60 s, short of a loaded machine's
	// foreground deletion); the test does.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", crashComponent, "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s", err, errOut)
	}
	gone(t, &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: acmeNS, Name: crashComponent}}, 3*time.Minute)
}

// TestBatch: a Job Component is Active once the Job completed; a CronJob Component once
// its CronJob exists with the schedule.
func TestBatch(t *testing.T) {
	componentSuite.Need(t)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: migrate}
spec: {image: busybox, workload: Job, command: [sh, -c, "echo done"]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: nightly}
spec: {image: busybox, workload: CronJob, schedule: "0 3 * * *"}
`)
	c := waitComponent(t, "migrate", 60*time.Second, "Active", componentActive)
	if c.Status.Workload.Kind != "Job" || c.Status.ReadyReplicas != 1 {
		t.Errorf("job status %+v", c.Status)
	}
	var job batchv1.Job
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "migrate"}, &job); err != nil {
		t.Fatal(err)
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || job.Status.Succeeded != 1 {
		t.Errorf("job restartPolicy %s succeeded %d", job.Spec.Template.Spec.RestartPolicy, job.Status.Succeeded)
	}
	c = waitComponent(t, "nightly", 30*time.Second, "Active", componentActive)
	var cj batchv1.CronJob
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "nightly"}, &cj); err != nil {
		t.Fatal(err)
	}
	if cj.Spec.Schedule != "0 3 * * *" || c.Status.Workload.Kind != "CronJob" || cj.Spec.JobTemplate.Spec.Template.Labels["kubeos.dev/component"] != "nightly" {
		t.Errorf("cronjob schedule %q labels %v status %+v", cj.Spec.Schedule, cj.Spec.JobTemplate.Spec.Template.Labels, c.Status)
	}
	// A changed Job Component runs a new Job (a Job's template is immutable).
	if _, errOut, err := alice(t, "", "-n", acmeNS, "patch", "component", "migrate", "--type=merge", "-p", `{"spec":{"command":["sh","-c","echo again"]}}`); err != nil {
		t.Fatalf("patch: %v %s", err, errOut)
	}
	waitComponent(t, "migrate", 90*time.Second, "Active again", componentActive)
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "migrate"}, &job); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(job.Spec.Template.Spec.Containers[0].Command, " "); got != "sh -c echo again" {
		t.Errorf("job command %q after the change", got)
	}
	for _, n := range []string{"migrate", "nightly"} {
		if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", n, "--wait=true", "--timeout=60s"); err != nil {
			t.Fatalf("delete %s: %v %s", n, err, errOut)
		}
	}
	gone(t, &batchv1.CronJob{ObjectMeta: cj.ObjectMeta}, 30*time.Second)
}

// TestAutoscaling: an autoscaled Component gets an HPA on CPU; the HPA's replicas are not
// fought over; dropping autoscaling deletes the HPA.
func TestAutoscaling(t *testing.T) {
	componentSuite.Need(t)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: api}
spec:
  image: busybox
  resources: {requests: {cpu: 100m}}
  autoscaling: {minReplicas: 2, maxReplicas: 4, targetCPUUtilizationPercentage: 60}
`)
	var hpa autoscalingv2.HorizontalPodAutoscaler
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		return componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "api"}, &hpa)
	})
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != "api" || *hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 4 ||
		len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 {
		t.Errorf("hpa spec %+v", hpa.Spec)
	}
	// The HPA controller raises the Deployment to minReplicas; the Component follows.
	c := waitComponent(t, "api", 90*time.Second, "Active with 2 replicas", func(c *v1alpha1.Component) bool { return componentActive(c) && c.Status.ReadyReplicas == 2 })
	if c.Status.Replicas != 2 {
		t.Errorf("status %+v", c.Status)
	}
	// Scaling through the scale subresource (as the HPA does) is not undone by the next pass.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "scale", "deployment", "api", "--replicas=3"); err != nil {
		t.Fatalf("scale: %v %s", err, errOut)
	}
	waitComponent(t, "api", 60*time.Second, "Active with 3 replicas", func(c *v1alpha1.Component) bool { return componentActive(c) && c.Status.ReadyReplicas == 3 })
	var d appsv1.Deployment
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "api"}, &d); err != nil || *d.Spec.Replicas != 3 {
		t.Errorf("deployment replicas %v (%v), want 3", d.Spec.Replicas, err)
	}
	// No autoscaling: the HPA goes, replicas come from the spec.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "patch", "component", "api", "--type=json", "-p",
		`[{"op":"remove","path":"/spec/autoscaling"},{"op":"add","path":"/spec/replicas","value":1}]`); err != nil {
		t.Fatalf("patch: %v %s", err, errOut)
	}
	gone(t, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: hpa.ObjectMeta}, 60*time.Second)
	waitComponent(t, "api", 60*time.Second, "Active with 1 replica", func(c *v1alpha1.Component) bool {
		return componentActive(c) && c.Status.Replicas == 1 && c.Status.ReadyReplicas == 1
	})
	// kubectl does not wait (RunKubectl kills it after 60 s, short of a loaded machine's
	// foreground deletion); the test does.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", "api", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s", err, errOut)
	}
	gone(t, &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: acmeNS, Name: "api"}}, 3*time.Minute)
}

// TestStatefulSetAndVolumes: a perReplica Volume makes the Component a StatefulSet with a
// volumeClaimTemplate; a shared Volume is mounted from its claim. (No provisioner runs
// with simulated nodes: the pods wait for their claims, and the Component says so.)
func TestStatefulSetAndVolumes(t *testing.T) {
	componentSuite.Need(t)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Volume
metadata: {name: data}
spec: {size: 1Gi, perReplica: true}
---
apiVersion: kubeos.dev/v1alpha1
kind: Volume
metadata: {name: files}
spec: {size: 2Gi}
---
apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: store}
spec:
  image: busybox
  replicas: 2
  exposes: [{name: tcp, port: 5432}]
  uses: [{kind: Volume, name: data, mountPath: /var/lib/data}, {kind: Volume, name: files, as: shared, mountPath: /files}]
`)
	var sts appsv1.StatefulSet
	servertest.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		return componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "store"}, &sts)
	})
	if vct := sts.Spec.VolumeClaimTemplates; len(vct) != 1 || vct[0].Name != "data" || vct[0].Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("volumeClaimTemplates %+v", vct)
	}
	var files v1alpha1.Volume
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "files"}, &files); err != nil {
		t.Fatal(err)
	}
	claim := files.Status.ClaimName
	if claim == "" {
		claim = "files-volume"
	}
	pod := sts.Spec.Template.Spec
	if len(pod.Volumes) != 1 || pod.Volumes[0].Name != "shared" || pod.Volumes[0].PersistentVolumeClaim == nil || pod.Volumes[0].PersistentVolumeClaim.ClaimName != claim {
		t.Errorf("pod volumes %+v, want claim %s", pod.Volumes, claim)
	}
	mounts := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["data"] != "/var/lib/data" || mounts["shared"] != "/files" {
		t.Errorf("mounts %v", mounts)
	}
	if sts.Spec.ServiceName != "store" {
		t.Errorf("serviceName %q", sts.Spec.ServiceName)
	}
	// No claim is provisioned here: the pods stay Pending and the Component Reconciling.
	c := waitComponent(t, "store", 60*time.Second, "Reconciling as a StatefulSet", func(c *v1alpha1.Component) bool {
		return c.Status.Workload != nil && c.Status.Phase == "Reconciling"
	})
	if c.Status.Workload.Kind != "StatefulSet" || c.Status.Service != "store" {
		t.Errorf("status %+v", c.Status)
	}
	// kubectl does not wait (RunKubectl kills it after 60 s, short of a loaded machine's
	// foreground deletion); the test does.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", "store", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s", err, errOut)
	}
	gone(t, &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: acmeNS, Name: "store"}}, 3*time.Minute)
	gone(t, &appsv1.StatefulSet{ObjectMeta: sts.ObjectMeta}, 30*time.Second)
}

// TestRolloutStrategyAndRelease: the rollout-strategy annotation (set by a Release) picks
// the Deployment's strategy, also from RollingUpdate to Recreate; status.release names
// the Component's Release.
func TestRolloutStrategyAndRelease(t *testing.T) {
	componentSuite.Need(t)
	ctx := ctxT(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: front}
spec: {image: busybox}
`)
	waitComponent(t, "front", 60*time.Second, "Active", componentActive)
	var d appsv1.Deployment
	if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "front"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("default strategy %q", d.Spec.Strategy.Type)
	}
	if _, errOut, err := alice(t, "", "-n", acmeNS, "annotate", "component", "front", "kubeos.dev/rollout-strategy=Recreate"); err != nil {
		t.Fatalf("annotate: %v %s", err, errOut)
	}
	servertest.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "front"}, &d); err != nil {
			return err
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
			return fmt.Errorf("strategy %+v", d.Spec.Strategy)
		}
		return nil
	})
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: front-release}
spec: {component: front}
`)
	waitComponent(t, "front", 60*time.Second, "showing its Release", func(c *v1alpha1.Component) bool { return c.Status.Release == "front-release" })
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "release", "front-release", "--wait=true", "--timeout=60s"); err != nil {
		t.Fatalf("delete release: %v %s", err, errOut)
	}
	waitComponent(t, "front", 60*time.Second, "without a Release", func(c *v1alpha1.Component) bool { return c.Status.Release == "" })
	// kubectl does not wait (RunKubectl kills it after 60 s, short of a loaded machine's
	// foreground deletion); the test does.
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component", "front", "--wait=false"); err != nil {
		t.Fatalf("delete: %v %s", err, errOut)
	}
	gone(t, &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Namespace: acmeNS, Name: "front"}}, 3*time.Minute)
}

// TestBadInput: what the validator refuses, as alice sees it with kubectl 1.33.
func TestBadInput(t *testing.T) {
	componentSuite.Need(t)
	comp := func(spec string) string {
		return "apiVersion: kubeos.dev/v1alpha1\nkind: Component\nmetadata: {name: bad}\nspec: " + spec + "\n"
	}
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"duplicate port names", `{image: busybox, exposes: [{name: http, port: 80}, {name: http, port: 81}]}`,
			[]string{"is invalid", "spec.exposes[1].name: Duplicate value"}},
		{"volume without mountPath", `{image: busybox, uses: [{kind: Volume, name: files}]}`, []string{"spec.uses[0].mountPath: Required value"}},
		{"cronjob without schedule", `{image: busybox, workload: CronJob}`, []string{"spec.schedule: Required value"}},
		{"unknown placeholder", `{image: busybox, env: [{name: X, value: "${resources.db.host}"}]}`, []string{"spec.env[0].value", `no entry of spec.uses is named "db"`}},
		{"autoscaling min > max", `{image: busybox, autoscaling: {minReplicas: 5, maxReplicas: 2}}`, []string{"spec.autoscaling.minReplicas"}},
		{"use kind", `{image: busybox, uses: [{kind: Secret, name: x}]}`, []string{"spec.uses[0].kind: Unsupported value"}},
		{"use in another namespace", `{image: busybox, uses: [{kind: Database, name: x, namespace: other}]}`, []string{"namespace"}},
		{"upstream: bad env name", `{image: busybox, env: [{name: "A=B", value: x}]}`, []string{"spec.env[0].name: Invalid value"}},
		{"upstream: probe without a handler", `{image: busybox, livenessProbe: {periodSeconds: 3}}`, []string{"spec.livenessProbe"}},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, comp(tc.spec), tc.want...) })
	}
	var c v1alpha1.Component
	if err := componentAdmin.Get(context.Background(), client.ObjectKey{Namespace: acmeNS, Name: "bad"}, &c); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("a refused Component exists (err %v)", err)
	}
}
