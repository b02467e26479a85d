package platform

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// Labels the Component puts beside v1alpha1.LabelComponent and LabelTrack (the contract
// with Release, Route and Application is in component_types.go).
const (
	// componentLabelApplication is put on member Components by the Application driver.
	componentLabelApplication = "kubeos.dev/application"
	// componentLabelEnvironment carries the Application's environment to the workload and pods.
	componentLabelEnvironment = "kubeos.dev/environment"
	// The app.kubernetes.io labels.
	componentLabelName      = "app.kubernetes.io/name"
	componentLabelManagedBy = "app.kubernetes.io/managed-by"
	componentLabelPartOf    = "app.kubernetes.io/part-of"
	componentManagedByKube  = "kube"
	// ComponentEnvEnvironment holds the Application's environment in the container.
	ComponentEnvEnvironment = "KUBEOS_ENVIRONMENT"
)

// componentDataKinds are the kinds whose connection Secret a use injects.
var componentDataKinds = []string{"Database", "Cache", "Topic", "Bucket"}

// componentUseKinds are the kinds a Component may use.
var componentUseKinds = append(slices.Clone(componentDataKinds), "Volume")

// componentUseInput is one entry of spec.uses with what the driver read for it.
type componentUseInput struct {
	v1alpha1.ComponentUse
	// Secret and Keys are a data use's connection Secret and its keys (sorted).
	Secret string
	Keys   []string
	// Claim is a shared Volume's PersistentVolumeClaim; Volume the Volume itself (size,
	// class, perReplica).
	Claim  string
	Volume *v1alpha1.Volume
}

// componentInputs is what the desired objects are built from beside the Component.
type componentInputs struct {
	Uses []componentUseInput
	// App is the Application that claims the Component (nil: none).
	App *v1alpha1.Application
}

// componentObjects are the objects a Component wants: its workload, and its Service and
// HPA when it exposes ports or autoscales (nil otherwise).
type componentObjects struct {
	Workload client.Object
	Service  *corev1.Service
	HPA      *autoscalingv2.HorizontalPodAutoscaler
}

// componentUseName is the name a use is known by in placeholders and the environment prefix.
func componentUseName(u v1alpha1.ComponentUse) string {
	if u.As != "" {
		return u.As
	}
	return u.Name
}

// componentEnvName upper-cases s and turns '-' and '.' into '_' (an environment variable name).
func componentEnvName(s string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(s))
}

// InjectedEnvName is the variable holding key of the connection of use as:
// <AS>_<KEY>, upper-cased, '-' and '.' as '_'.
func InjectedEnvName(as, key string) string {
	return componentEnvName(as) + "_" + componentEnvName(key)
}

// componentPlaceholderRE matches ${resources.<as>.<key>}; componentMalformedRE any other ${resources.…}.
var (
	componentPlaceholderRE = regexp.MustCompile(`\$\{resources\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([-._a-zA-Z0-9]+)\}`)
	componentMalformedRE   = regexp.MustCompile(`\$\{resources\.[^}]*\}?`)
)

// componentPlaceholder is one ${resources.<as>.<key>} in an env value.
type componentPlaceholder struct{ As, Key string }

// parseComponentPlaceholders lists the placeholders of v, or the first malformed one.
func parseComponentPlaceholders(v string) ([]componentPlaceholder, error) {
	var out []componentPlaceholder
	for _, m := range componentPlaceholderRE.FindAllStringSubmatch(v, -1) {
		out = append(out, componentPlaceholder{As: m[1], Key: m[3]})
	}
	rest := componentPlaceholderRE.ReplaceAllString(v, "")
	if bad := componentMalformedRE.FindString(rest); bad != "" {
		return nil, fmt.Errorf("malformed placeholder %q: want ${resources.<use>.<key>}", bad)
	}
	return out, nil
}

// componentLabels are the labels of everything a Component creates.
func componentLabels(c *v1alpha1.Component, app *v1alpha1.Application) map[string]string {
	l := map[string]string{}
	if app != nil {
		maps.Copy(l, app.Spec.Labels)
		if app.Spec.Environment != "" {
			l[componentLabelEnvironment] = app.Spec.Environment
		}
		l[componentLabelApplication] = app.Name
		l[componentLabelPartOf] = app.Name
	}
	for _, k := range []string{componentLabelPartOf, componentLabelApplication} {
		if v := c.Labels[k]; v != "" {
			l[k] = v
		}
	}
	l[v1alpha1.LabelComponent] = c.Name
	l[componentLabelName] = c.Name
	l[componentLabelManagedBy] = componentManagedByKube
	return l
}

// componentSelector select the Component's own (stable) pods.
func componentSelector(c *v1alpha1.Component) map[string]string {
	return map[string]string{v1alpha1.LabelComponent: c.Name, v1alpha1.LabelTrack: v1alpha1.TrackStable}
}

// componentWorkloadKind is the kind the Component runs as: spec.workload, else StatefulSet when a
// used Volume is perReplica, else Deployment.
func componentWorkloadKind(c *v1alpha1.Component, uses []componentUseInput) string {
	if c.Spec.Workload != "" {
		return c.Spec.Workload
	}
	for _, u := range uses {
		if u.Volume != nil && u.Volume.Spec.PerReplica {
			return v1alpha1.WorkloadStatefulSet
		}
	}
	return v1alpha1.WorkloadDeployment
}

// componentPortName is an exposed port's name: its own or p<port>.
func componentPortName(p v1alpha1.ComponentPort) string {
	if p.Name != "" {
		return p.Name
	}
	return fmt.Sprintf("p%d", p.Port)
}

// componentVolumeName is the pod volume (and claim template) of a Volume use: a DNS label.
func componentVolumeName(u v1alpha1.ComponentUse) string {
	n := strings.ReplaceAll(componentUseName(u), ".", "-")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// buildComponentEnv is the container's environment: every key of each data use's connection as
// <AS>_<KEY> from its Secret, KUBEOS_ENVIRONMENT from the Application, then spec.env with
// its placeholders turned into $(<AS>_<KEY>) references (expanded by the kubelet from the
// variables before them, so no secret value lands in the pod spec).
func buildComponentEnv(c *v1alpha1.Component, in componentInputs) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	keys := map[string][]string{}
	for _, u := range in.Uses {
		if !slices.Contains(componentDataKinds, u.Kind) {
			continue
		}
		as := componentUseName(u.ComponentUse)
		keys[as] = u.Keys
		for _, k := range u.Keys {
			env = append(env, corev1.EnvVar{Name: InjectedEnvName(as, k), ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: u.Secret}, Key: k}}})
		}
	}
	if in.App != nil && in.App.Spec.Environment != "" {
		env = append(env, corev1.EnvVar{Name: ComponentEnvEnvironment, Value: in.App.Spec.Environment})
	}
	for i, e := range c.Spec.Env {
		e = *e.DeepCopy()
		phs, err := parseComponentPlaceholders(e.Value)
		if err != nil {
			return nil, fmt.Errorf("spec.env[%d] (%s): %w", i, e.Name, err)
		}
		for _, p := range phs {
			ks, ok := keys[p.As]
			if !ok {
				return nil, fmt.Errorf("spec.env[%d] (%s): ${resources.%s.%s}: no data use named %q", i, e.Name, p.As, p.Key, p.As)
			}
			if ks != nil && !slices.Contains(ks, p.Key) {
				return nil, fmt.Errorf("spec.env[%d] (%s): ${resources.%s.%s}: the connection of %s has no key %q (it has %s)",
					i, e.Name, p.As, p.Key, p.As, p.Key, strings.Join(ks, ", "))
			}
		}
		e.Value = componentPlaceholderRE.ReplaceAllStringFunc(e.Value, func(m string) string {
			s := componentPlaceholderRE.FindStringSubmatch(m)
			return "$(" + InjectedEnvName(s[1], s[3]) + ")"
		})
		env = append(env, e)
	}
	return env, nil
}

// buildComponentPodTemplate is the Component's pod template.
func buildComponentPodTemplate(c *v1alpha1.Component, in componentInputs, kind string) (corev1.PodTemplateSpec, []corev1.PersistentVolumeClaim, error) {
	env, err := buildComponentEnv(c, in)
	if err != nil {
		return corev1.PodTemplateSpec{}, nil, err
	}
	labels := componentLabels(c, in.App)
	maps.Copy(labels, componentSelector(c))
	ctr := corev1.Container{Name: v1alpha1.ComponentContainer, Image: c.Spec.Image, Command: c.Spec.Command, Args: c.Spec.Args, Env: env,
		LivenessProbe: c.Spec.LivenessProbe, ReadinessProbe: c.Spec.ReadinessProbe}
	switch {
	case c.Spec.Resources != nil:
		ctr.Resources = *c.Spec.Resources.DeepCopy()
	case in.App != nil && in.App.Spec.DefaultResources != nil:
		ctr.Resources = *in.App.Spec.DefaultResources.DeepCopy()
	}
	for _, p := range c.Spec.Exposes {
		ctr.Ports = append(ctr.Ports, corev1.ContainerPort{Name: componentPortName(p), ContainerPort: p.Port, Protocol: componentProtocol(p.Protocol)})
	}
	var pod corev1.PodSpec
	var claims []corev1.PersistentVolumeClaim
	for _, u := range in.Uses {
		if u.Kind != "Volume" {
			continue
		}
		name := componentVolumeName(u.ComponentUse)
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: u.MountPath})
		if u.Volume != nil && u.Volume.Spec.PerReplica {
			if kind != v1alpha1.WorkloadStatefulSet {
				return corev1.PodTemplateSpec{}, nil, fmt.Errorf("Volume %s is perReplica: only a StatefulSet can use it (workload is %s)", u.Name, kind)
			}
			claims = append(claims, componentClaimTemplate(name, u.Volume))
			continue
		}
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: u.Claim}}})
	}
	pod.Containers = []corev1.Container{ctr}
	if kind == v1alpha1.WorkloadJob || kind == v1alpha1.WorkloadCronJob {
		pod.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod}, claims, nil
}

func componentProtocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// componentClaimTemplate is a perReplica Volume's volumeClaimTemplate.
func componentClaimTemplate(name string, v *v1alpha1.Volume) corev1.PersistentVolumeClaim {
	mode := corev1.PersistentVolumeAccessMode(v.Spec.AccessMode)
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	class := v.Spec.StorageClass
	if class == "" {
		class = v1alpha1.LocalPathClass
	}
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubeos.dev/volume": v.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{mode}, StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: v.Spec.Size}}},
	}
}

// buildComponent is the pure core of the driver: the objects c wants given what it uses.
// They carry c's controller ownerReference and labels; an error is a problem of the spec
// (or of what it uses) that a retry does not fix.
func buildComponent(c *v1alpha1.Component, in componentInputs) (componentObjects, error) {
	kind := componentWorkloadKind(c, in.Uses)
	tmpl, claims, err := buildComponentPodTemplate(c, in, kind)
	if err != nil {
		return componentObjects{}, err
	}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: componentLabels(c, in.App), OwnerReferences: ownerRef(c, "Component")}
	}
	replicas := c.Spec.Replicas
	if replicas == nil {
		one := int32(1)
		replicas = &one
	}
	if c.Spec.Autoscaling != nil {
		replicas = nil // the HPA owns spec.replicas
	}
	sel := &metav1.LabelSelector{MatchLabels: componentSelector(c)}
	var out componentObjects
	switch kind {
	case v1alpha1.WorkloadDeployment:
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta(),
			Spec: appsv1.DeploymentSpec{Replicas: replicas, Selector: sel, Template: tmpl}}
		switch s := c.Annotations[v1alpha1.AnnotationRolloutStrategy]; s {
		case string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType):
			d.Spec.Strategy.Type = appsv1.DeploymentStrategyType(s)
		case "":
		default:
			return componentObjects{}, fmt.Errorf("annotation %s: %q is neither Recreate nor RollingUpdate", v1alpha1.AnnotationRolloutStrategy, s)
		}
		out.Workload = d
	case v1alpha1.WorkloadStatefulSet:
		s := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: meta(),
			Spec: appsv1.StatefulSetSpec{Replicas: replicas, Selector: sel, Template: tmpl, VolumeClaimTemplates: claims}}
		if len(c.Spec.Exposes) > 0 {
			s.Spec.ServiceName = c.Name
		}
		out.Workload = s
	case v1alpha1.WorkloadJob:
		out.Workload = &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: meta(),
			Spec: batchv1.JobSpec{Template: tmpl}}
	case v1alpha1.WorkloadCronJob:
		out.Workload = &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: meta(),
			Spec: batchv1.CronJobSpec{Schedule: c.Spec.Schedule, JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: componentLabels(c, in.App)}, Spec: batchv1.JobSpec{Template: tmpl}}}}
	default:
		return componentObjects{}, fmt.Errorf("spec.workload %q: want Deployment, StatefulSet, Job or CronJob", kind)
	}
	if len(c.Spec.Exposes) > 0 {
		svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta(),
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{v1alpha1.LabelComponent: c.Name}}}
		for _, p := range c.Spec.Exposes {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: componentPortName(p), Port: p.Port, TargetPort: intstr.FromInt32(p.Port),
				Protocol: componentProtocol(p.Protocol)})
		}
		out.Service = svc
	}
	if a := c.Spec.Autoscaling; a != nil {
		if kind != v1alpha1.WorkloadDeployment && kind != v1alpha1.WorkloadStatefulSet {
			return componentObjects{}, fmt.Errorf("spec.autoscaling: a %s does not scale", kind)
		}
		minR := a.MinReplicas
		if minR == 0 {
			minR = 1
		}
		target := int32(80)
		if a.TargetCPUUtilizationPercentage != nil {
			target = *a.TargetCPUUtilizationPercentage
		}
		out.HPA = &autoscalingv2.HorizontalPodAutoscaler{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: meta(), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: kind, Name: c.Name},
				MinReplicas:    &minR, MaxReplicas: a.MaxReplicas,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
			}}
	}
	return out, nil
}
