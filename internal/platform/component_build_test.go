package platform

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func testComponent(mut func(c *v1alpha1.Component)) *v1alpha1.Component {
	c := &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec: v1alpha1.ComponentSpec{Image: "busybox:1.36"}}
	if mut != nil {
		mut(c)
	}
	return c
}

func dbUse(as string, keys ...string) componentUseInput {
	return componentUseInput{ComponentUse: v1alpha1.ComponentUse{Kind: "Database", Name: "orders", As: as}, Secret: "orders-database", Keys: keys}
}

func TestBuildComponentDeployment(t *testing.T) {
	three := int32(3)
	c := testComponent(func(c *v1alpha1.Component) {
		c.Labels = map[string]string{componentLabelPartOf: "shop"}
		c.Spec.Replicas = &three
		c.Spec.Exposes = []v1alpha1.ComponentPort{{Name: "http", Port: 8080}, {Port: 9090, Protocol: "UDP"}}
	})
	objs, err := buildComponent(c, componentInputs{})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := objs.Workload.(*appsv1.Deployment)
	if !ok {
		t.Fatalf("workload is %T, want a Deployment", objs.Workload)
	}
	if d.Name != "web" || d.Namespace != "shop" || *d.Spec.Replicas != 3 {
		t.Errorf("deployment %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	if ref := metav1.GetControllerOf(d); ref == nil || ref.Kind != "Component" || ref.UID != "uid-1" {
		t.Errorf("controller ref %+v", ref)
	}
	wantLabels := map[string]string{v1alpha1.LabelComponent: "web", componentLabelName: "web", componentLabelManagedBy: "kube", componentLabelPartOf: "shop"}
	if !reflect.DeepEqual(d.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", d.Labels, wantLabels)
	}
	if want := map[string]string{v1alpha1.LabelComponent: "web", v1alpha1.LabelTrack: "stable"}; !reflect.DeepEqual(d.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector %v, want %v", d.Spec.Selector.MatchLabels, want)
	}
	pl := d.Spec.Template.Labels
	if pl[v1alpha1.LabelTrack] != "stable" || pl[v1alpha1.LabelComponent] != "web" || pl[componentLabelPartOf] != "shop" {
		t.Errorf("pod labels %v", pl)
	}
	ctr := d.Spec.Template.Spec.Containers
	if len(ctr) != 1 || ctr[0].Name != "main" || ctr[0].Image != "busybox:1.36" {
		t.Fatalf("containers %+v", ctr)
	}
	if got := ctr[0].Ports; len(got) != 2 || got[0].Name != "http" || got[1].Name != "p9090" || got[1].Protocol != "UDP" {
		t.Errorf("container ports %+v", got)
	}
	if d.Spec.Strategy.Type != "" {
		t.Errorf("strategy %q without the annotation", d.Spec.Strategy.Type)
	}
	svc := objs.Service
	if svc == nil {
		t.Fatal("no Service for exposed ports")
	}
	if !reflect.DeepEqual(svc.Spec.Selector, map[string]string{v1alpha1.LabelComponent: "web"}) || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service selector %v type %s", svc.Spec.Selector, svc.Spec.Type)
	}
	if p := svc.Spec.Ports; len(p) != 2 || p[0].Name != "http" || p[0].Port != 8080 || p[0].TargetPort.IntVal != 8080 || p[1].Name != "p9090" {
		t.Errorf("service ports %+v", p)
	}
	if objs.HPA != nil {
		t.Error("HPA without autoscaling")
	}
}

func TestBuildComponentKinds(t *testing.T) {
	perReplica := &v1alpha1.Volume{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: v1alpha1.VolumeSpec{Size: resource.MustParse("1Gi"), PerReplica: true}}
	shared := &v1alpha1.Volume{ObjectMeta: metav1.ObjectMeta{Name: "files"}, Spec: v1alpha1.VolumeSpec{Size: resource.MustParse("1Gi")}}
	for _, tc := range []struct {
		name string
		mut  func(*v1alpha1.Component)
		uses []componentUseInput
		want string
		err  string
	}{
		{name: "default", want: "Deployment"},
		{name: "perReplica volume", want: "StatefulSet",
			uses: []componentUseInput{{ComponentUse: v1alpha1.ComponentUse{Kind: "Volume", Name: "data", MountPath: "/data"}, Volume: perReplica}}},
		{name: "shared volume", want: "Deployment",
			uses: []componentUseInput{{ComponentUse: v1alpha1.ComponentUse{Kind: "Volume", Name: "files", MountPath: "/f"}, Volume: shared, Claim: "files-volume"}}},
		{name: "perReplica on a Deployment", mut: func(c *v1alpha1.Component) { c.Spec.Workload = "Deployment" }, err: "only a StatefulSet",
			uses: []componentUseInput{{ComponentUse: v1alpha1.ComponentUse{Kind: "Volume", Name: "data", MountPath: "/data"}, Volume: perReplica}}},
		{name: "job", mut: func(c *v1alpha1.Component) { c.Spec.Workload = "Job" }, want: "Job"},
		{name: "cronjob", mut: func(c *v1alpha1.Component) { c.Spec.Workload = "CronJob"; c.Spec.Schedule = "*/5 * * * *" }, want: "CronJob"},
		{name: "job autoscaling", mut: func(c *v1alpha1.Component) {
			c.Spec.Workload = "Job"
			c.Spec.Autoscaling = &v1alpha1.ComponentAutoscaling{MaxReplicas: 3}
		}, err: "does not scale"},
		{name: "bad strategy", mut: func(c *v1alpha1.Component) {
			c.Annotations = map[string]string{v1alpha1.AnnotationRolloutStrategy: "Blue"}
		}, err: "neither Recreate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := buildComponent(testComponent(tc.mut), componentInputs{Uses: tc.uses})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var tmpl corev1.PodTemplateSpec
			switch w := objs.Workload.(type) {
			case *appsv1.Deployment:
				tmpl = w.Spec.Template
			case *appsv1.StatefulSet:
				tmpl = w.Spec.Template
				if len(w.Spec.VolumeClaimTemplates) != 1 || w.Spec.VolumeClaimTemplates[0].Name != "data" ||
					*w.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "local-path" {
					t.Errorf("claim templates %+v", w.Spec.VolumeClaimTemplates)
				}
				if len(tmpl.Spec.Volumes) != 0 {
					t.Errorf("a perReplica volume is a pod volume too: %+v", tmpl.Spec.Volumes)
				}
			case *batchv1.Job:
				tmpl = w.Spec.Template
				if w.Spec.Selector != nil {
					t.Error("a Job's selector is the server's")
				}
			case *batchv1.CronJob:
				tmpl = w.Spec.JobTemplate.Spec.Template
				if w.Spec.Schedule != "*/5 * * * *" {
					t.Errorf("schedule %q", w.Spec.Schedule)
				}
			}
			if got := objs.Workload.GetObjectKind().GroupVersionKind().Kind; got != tc.want {
				t.Fatalf("kind %s, want %s", got, tc.want)
			}
			if (tc.want == "Job" || tc.want == "CronJob") != (tmpl.Spec.RestartPolicy == corev1.RestartPolicyOnFailure) {
				t.Errorf("restartPolicy %q for a %s", tmpl.Spec.RestartPolicy, tc.want)
			}
			mounts := tmpl.Spec.Containers[0].VolumeMounts
			if len(tc.uses) != len(mounts) {
				t.Errorf("mounts %+v for uses %+v", mounts, tc.uses)
			}
			if tc.name == "shared volume" && (len(tmpl.Spec.Volumes) != 1 || tmpl.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "files-volume" || mounts[0].MountPath != "/f") {
				t.Errorf("volumes %+v mounts %+v", tmpl.Spec.Volumes, mounts)
			}
		})
	}
}

func TestBuildComponentEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
		uses []componentUseInput
		app  *v1alpha1.Application
		want []string // name=value or name<-secret/key
		err  string
	}{
		{name: "injected keys, then spec env with placeholders",
			uses: []componentUseInput{dbUse("", "host", "password"), {ComponentUse: v1alpha1.ComponentUse{Kind: "Cache", Name: "sessions-store", As: "cache"}, Secret: "sessions-store-cache", Keys: []string{"uri"}}},
			env:  []corev1.EnvVar{{Name: "DSN", Value: "postgres://${resources.orders.host}/x?p=${resources.orders.password}"}, {Name: "PLAIN", Value: "1"}},
			want: []string{"ORDERS_HOST<-orders-database/host", "ORDERS_PASSWORD<-orders-database/password", "CACHE_URI<-sessions-store-cache/uri",
				"DSN=postgres://$(ORDERS_HOST)/x?p=$(ORDERS_PASSWORD)", "PLAIN=1"}},
		{name: "as with dashes; key with a dot", uses: []componentUseInput{dbUse("main-db", "key.prefix")},
			want: []string{"MAIN_DB_KEY_PREFIX<-orders-database/key.prefix"}},
		{name: "application environment", app: &v1alpha1.Application{Spec: v1alpha1.ApplicationSpec{Environment: "prod"}},
			want: []string{"KUBEOS_ENVIRONMENT=prod"}},
		{name: "unknown use", env: []corev1.EnvVar{{Name: "X", Value: "${resources.nope.host}"}}, err: `no data use named "nope"`},
		{name: "unknown key", uses: []componentUseInput{dbUse("", "host")}, env: []corev1.EnvVar{{Name: "X", Value: "${resources.orders.port}"}},
			err: `has no key "port"`},
		{name: "malformed", env: []corev1.EnvVar{{Name: "X", Value: "${resources.orders}"}}, err: "malformed placeholder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testComponent(func(c *v1alpha1.Component) { c.Spec.Env = tc.env })
			env, err := buildComponentEnv(c, componentInputs{Uses: tc.uses, App: tc.app})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range env {
				if e.ValueFrom != nil {
					got = append(got, e.Name+"<-"+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
				} else {
					got = append(got, e.Name+"="+e.Value)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("env\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	// The spec is not modified.
	c := testComponent(func(c *v1alpha1.Component) {
		c.Spec.Env = []corev1.EnvVar{{Name: "X", Value: "${resources.orders.host}"}}
	})
	if _, err := buildComponentEnv(c, componentInputs{Uses: []componentUseInput{dbUse("", "host")}}); err != nil || c.Spec.Env[0].Value != "${resources.orders.host}" {
		t.Errorf("spec env changed: %v %v", c.Spec.Env, err)
	}
}

func TestBuildComponentApplicationAndHPA(t *testing.T) {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	app := &v1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: v1alpha1.ApplicationSpec{Labels: map[string]string{"team": "a", v1alpha1.LabelComponent: "spoof"}, Environment: "dev", DefaultResources: &res}}
	target := int32(50)
	c := testComponent(func(c *v1alpha1.Component) {
		c.Spec.Replicas = ptrInt32(5)
		c.Spec.Autoscaling = &v1alpha1.ComponentAutoscaling{MinReplicas: 2, MaxReplicas: 6, TargetCPUUtilizationPercentage: &target}
	})
	objs, err := buildComponent(c, componentInputs{App: app})
	if err != nil {
		t.Fatal(err)
	}
	d := objs.Workload.(*appsv1.Deployment)
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d with autoscaling: the HPA owns them", *d.Spec.Replicas)
	}
	if d.Labels["team"] != "a" || d.Labels[componentLabelPartOf] != "shop" || d.Labels[componentLabelEnvironment] != "dev" || d.Labels[v1alpha1.LabelComponent] != "web" {
		t.Errorf("labels %v", d.Labels)
	}
	if got := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "100m" {
		t.Errorf("default resources: cpu %s", got)
	}
	h := objs.HPA
	if h == nil {
		t.Fatal("no HPA")
	}
	if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != "web" || *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 6 ||
		*h.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 || h.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("hpa %+v", h.Spec)
	}
	// Own resources win over the Application's defaults; the rollout annotation sets the strategy.
	own := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	c.Spec.Resources = &own
	c.Annotations = map[string]string{v1alpha1.AnnotationRolloutStrategy: "Recreate"}
	objs, _ = buildComponent(c, componentInputs{App: app})
	d = objs.Workload.(*appsv1.Deployment)
	if r := d.Spec.Template.Spec.Containers[0].Resources; r.Requests != nil || r.Limits.Memory().String() != "64Mi" {
		t.Errorf("resources %+v", r)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q", d.Spec.Strategy.Type)
	}
}

func ptrInt32(v int32) *int32 { return &v }

func TestReadComponentWorkload(t *testing.T) {
	dep := func(gen, obs int64, want, ready, updated, total, avail int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &want,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "img:1"}}}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: obs, ReadyReplicas: ready, UpdatedReplicas: updated, Replicas: total, AvailableReplicas: avail}}
	}
	for _, tc := range []struct {
		name string
		obj  any
		done bool
	}{
		{"rolled out", dep(2, 2, 3, 3, 3, 3, 3), true},
		{"old generation observed", dep(3, 2, 3, 3, 3, 3, 3), false},
		{"not all ready", dep(1, 1, 3, 2, 3, 3, 2), false},
		{"old pods still there", dep(1, 1, 3, 3, 3, 4, 3), false},
		{"zero replicas", dep(1, 1, 0, 0, 0, 0, 0), true},
		{"job complete", &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}, true},
		{"job running", &batchv1.Job{Status: batchv1.JobStatus{Active: 1}}, false},
		{"cronjob", &batchv1.CronJob{}, true},
		{"statefulset ready", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptrInt32(2)},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: 2, Replicas: 2, UpdatedReplicas: 2, CurrentRevision: "a", UpdateRevision: "a"}}, true},
		{"statefulset updating", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptrInt32(2)},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: 2, Replicas: 2, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ws componentWorkloadState
			switch o := tc.obj.(type) {
			case *appsv1.Deployment:
				ws = readComponentWorkload(o)
				if ws.Image != "img:1" {
					t.Errorf("image %q", ws.Image)
				}
			case *batchv1.Job:
				ws = readComponentWorkload(o)
			case *batchv1.CronJob:
				ws = readComponentWorkload(o)
			case *appsv1.StatefulSet:
				ws = readComponentWorkload(o)
			}
			if ws.Done != tc.done {
				t.Errorf("done %v, want %v (%+v)", ws.Done, tc.done, ws)
			}
		})
	}
	failed := readComponentWorkload(&batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}})
	if !failed.Failed || !strings.Contains(failed.Message, "BackoffLimitExceeded") {
		t.Errorf("failed job: %+v", failed)
	}
}

func TestComponentPodBlocker(t *testing.T) {
	waiting := func(name, reason, msg string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	unsched := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}}
	for _, tc := range []struct {
		name         string
		pods         []corev1.Pod
		reason, want string
	}{
		{"creating is no blocker", []corev1.Pod{waiting("a", "ContainerCreating", "")}, "", ""},
		{"image pull", []corev1.Pod{waiting("b", "ContainerCreating", ""), waiting("c", "ImagePullBackOff", `Back-off pulling image "nope:1"`)},
			"ImagePullBackOff", `pod c: container main: ImagePullBackOff: Back-off pulling image "nope:1"`},
		{"first by name", []corev1.Pod{waiting("z", "ErrImagePull", "x"), waiting("b", "CrashLoopBackOff", "back-off")}, "CrashLoopBackOff", "pod b: container main: CrashLoopBackOff: back-off"},
		{"unschedulable", []corev1.Pod{unsched}, "Unschedulable", "pod a: 0/3 nodes are available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, m := componentPodBlocker(tc.pods)
			if r != tc.reason || m != tc.want {
				t.Errorf("got %q %q, want %q %q", r, m, tc.reason, tc.want)
			}
		})
	}
}

func TestComponentFieldPath(t *testing.T) {
	vols := []int{2, 4} // the Volume uses are spec.uses[2] and [4]
	for _, tc := range []struct{ kind, in, want string }{
		{"Deployment", "spec.template.spec.containers[0].image", "spec.image"},
		{"Deployment", "spec.template.spec.containers[0].env[1].name", "spec.env[1].name"},
		{"Deployment", "spec.template.spec.containers[0].ports[0].containerPort", "spec.exposes[0].containerPort"},
		{"Deployment", "spec.template.spec.containers[0].livenessProbe.httpGet.port", "spec.livenessProbe.httpGet.port"},
		{"Deployment", "spec.template.spec.containers[0].volumeMounts[1].mountPath", "spec.uses[4].mountPath"},
		{"StatefulSet", "spec.template.spec.volumes[0].name", "spec.uses[2].name"},
		{"CronJob", "spec.jobTemplate.spec.template.spec.containers[0].resources.limits", "spec.resources.limits"},
		{"CronJob", "spec.schedule", "spec.schedule"},
		{"Service", "spec.ports[1].name", "spec.exposes[1].name"},
		{"HorizontalPodAutoscaler", "spec.minReplicas", "spec.autoscaling.minReplicas"},
		{"Deployment", "metadata.name", "metadata.name"},
	} {
		if got := componentFieldPath(tc.kind, tc.in, vols); got != tc.want {
			t.Errorf("%s %s → %s, want %s", tc.kind, tc.in, got, tc.want)
		}
	}
}
