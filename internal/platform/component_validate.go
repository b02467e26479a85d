package platform

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/registry/workload"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func init() { kindValidators["Component"] = validateComponent }

// validateComponent refuses (422) what the Component's own rules forbid
// (componentSpecErrors) and then runs upstream's validation of the objects the driver
// would write (the workload with its pod template, the Service, the HPA), with the field
// paths put back under the Component's spec (spec.template.spec.containers[0].image →
// spec.image), so a bad probe or resource surfaces at admission rather than as a Failed
// Component. An update that leaves the spec as it was (the engine's finalizer, labels) is
// not validated again: that spec was admitted, and building and validating its objects is
// most of a Component write's admission cost.
func validateComponent(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	if old != nil && equality.Semantic.DeepEqual(obj.Object["spec"], old.Object["spec"]) {
		return nil
	}
	var c v1alpha1.Component
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &c); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", "cannot be decoded: "+err.Error())}
	}
	if c.Namespace == "" {
		c.Namespace = AdmissionContext(ctx).Namespace
	}
	if errs := componentSpecErrors(&c, obj.Object); len(errs) > 0 {
		return errs
	}
	return componentUpstreamErrors(&c)
}

var cronFieldsRE = regexp.MustCompile(`^\S+(\s+\S+){4}$|^@\w+$`)

// componentSpecErrors are the Component's own rules; raw is the object as sent (a field the
// type does not have, such as a use's namespace, is only seen there).
func componentSpecErrors(c *v1alpha1.Component, raw map[string]any) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	kind := c.Spec.Workload
	if kind == "" {
		kind = v1alpha1.WorkloadDeployment
	}
	if _, ok := componentWorkloadTypes[kind]; !ok {
		errs = append(errs, field.NotSupported(spec.Child("workload"), c.Spec.Workload, slices.Sorted(mapsKeys(componentWorkloadTypes))))
	}
	if strings.TrimSpace(c.Spec.Image) == "" {
		errs = append(errs, field.Required(spec.Child("image"), ""))
	}
	if s := c.Annotations[v1alpha1.AnnotationRolloutStrategy]; s != "" && s != "Recreate" && s != "RollingUpdate" {
		errs = append(errs, field.NotSupported(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationRolloutStrategy), s, []string{"Recreate", "RollingUpdate"}))
	}
	// Ports.
	names, ports := map[string]int{}, map[string]int{}
	for i, p := range c.Spec.Exposes {
		pp := spec.Child("exposes").Index(i)
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, field.Invalid(pp.Child("port"), p.Port, "must be between 1 and 65535"))
		}
		if p.Name != "" {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
			}
		}
		if p.Protocol != "" && p.Protocol != "TCP" && p.Protocol != "UDP" {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, []string{"TCP", "UDP"}))
		}
		n := componentPortName(p)
		if j, dup := names[n]; dup {
			errs = append(errs, field.Duplicate(pp.Child("name"), fmt.Sprintf("%s (as spec.exposes[%d])", n, j)))
		}
		names[n] = i
		key := fmt.Sprintf("%d/%s", p.Port, componentProtocol(p.Protocol))
		if j, dup := ports[key]; dup {
			errs = append(errs, field.Duplicate(pp.Child("port"), fmt.Sprintf("%s (as spec.exposes[%d])", key, j)))
		}
		ports[key] = i
	}
	// Uses.
	rawUses, _, _ := unstructured.NestedSlice(raw, "spec", "uses")
	uses := map[string]v1alpha1.ComponentUse{}
	mounts := map[string]int{}
	for i, u := range c.Spec.Uses {
		up := spec.Child("uses").Index(i)
		if i < len(rawUses) {
			if m, ok := rawUses[i].(map[string]any); ok {
				if _, has := m["namespace"]; has {
					errs = append(errs, field.Forbidden(up.Child("namespace"), "a Component uses only objects of its own namespace"))
				}
			}
		}
		if !slices.Contains(componentUseKinds, u.Kind) {
			errs = append(errs, field.NotSupported(up.Child("kind"), u.Kind, componentUseKinds))
		}
		if u.Name == "" {
			errs = append(errs, field.Required(up.Child("name"), ""))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(u.Name) {
				errs = append(errs, field.Invalid(up.Child("name"), u.Name, msg))
			}
		}
		as := componentUseName(u)
		if u.As != "" {
			for _, msg := range validation.IsDNS1123Label(u.As) {
				errs = append(errs, field.Invalid(up.Child("as"), u.As, msg))
			}
		}
		if _, dup := uses[as]; dup && as != "" {
			errs = append(errs, field.Duplicate(up.Child("as"), as))
		}
		uses[as] = u
		switch {
		case u.Kind == "Volume" && u.MountPath == "":
			errs = append(errs, field.Required(up.Child("mountPath"), "a Volume is mounted at a path"))
		case u.Kind == "Volume" && !path.IsAbs(u.MountPath):
			errs = append(errs, field.Invalid(up.Child("mountPath"), u.MountPath, "must be an absolute path"))
		case u.Kind == "Volume":
			mp := path.Clean(u.MountPath)
			if j, dup := mounts[mp]; dup {
				errs = append(errs, field.Duplicate(up.Child("mountPath"), fmt.Sprintf("%s (as spec.uses[%d])", mp, j)))
			}
			mounts[mp] = i
		case u.MountPath != "":
			errs = append(errs, field.Invalid(up.Child("mountPath"), u.MountPath, "only a Volume is mounted"))
		}
	}
	// Placeholders name a data use.
	for i, e := range c.Spec.Env {
		ep := spec.Child("env").Index(i).Child("value")
		phs, err := parseComponentPlaceholders(e.Value)
		if err != nil {
			errs = append(errs, field.Invalid(ep, e.Value, err.Error()))
			continue
		}
		for _, p := range phs {
			u, ok := uses[p.As]
			switch {
			case !ok:
				errs = append(errs, field.Invalid(ep, e.Value, fmt.Sprintf("${resources.%s.%s}: no entry of spec.uses is named %q", p.As, p.Key, p.As)))
			case !slices.Contains(componentDataKinds, u.Kind):
				errs = append(errs, field.Invalid(ep, e.Value, fmt.Sprintf("${resources.%s.%s}: %s is a %s, which has no connection", p.As, p.Key, p.As, u.Kind)))
			}
		}
	}
	// Schedule.
	switch {
	case kind == v1alpha1.WorkloadCronJob && strings.TrimSpace(c.Spec.Schedule) == "":
		errs = append(errs, field.Required(spec.Child("schedule"), "a CronJob runs on a schedule"))
	case kind == v1alpha1.WorkloadCronJob && !cronFieldsRE.MatchString(strings.TrimSpace(c.Spec.Schedule)):
		errs = append(errs, field.Invalid(spec.Child("schedule"), c.Spec.Schedule, "want five cron fields or a @descriptor"))
	case kind != v1alpha1.WorkloadCronJob && c.Spec.Schedule != "":
		errs = append(errs, field.Invalid(spec.Child("schedule"), c.Spec.Schedule, "only a CronJob has a schedule"))
	}
	// Replicas and autoscaling.
	if c.Spec.Replicas != nil && *c.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *c.Spec.Replicas, "must not be negative"))
	}
	if a := c.Spec.Autoscaling; a != nil {
		ap := spec.Child("autoscaling")
		if kind == v1alpha1.WorkloadJob || kind == v1alpha1.WorkloadCronJob {
			errs = append(errs, field.Forbidden(ap, "a "+kind+" does not autoscale"))
		}
		if a.MaxReplicas < 1 {
			errs = append(errs, field.Invalid(ap.Child("maxReplicas"), a.MaxReplicas, "must be at least 1"))
		}
		if a.MinReplicas < 0 {
			errs = append(errs, field.Invalid(ap.Child("minReplicas"), a.MinReplicas, "must not be negative"))
		}
		if a.MinReplicas > a.MaxReplicas {
			errs = append(errs, field.Invalid(ap.Child("minReplicas"), a.MinReplicas, fmt.Sprintf("must not exceed maxReplicas (%d)", a.MaxReplicas)))
		}
		if t := a.TargetCPUUtilizationPercentage; t != nil && (*t < 1 || *t > 100) {
			errs = append(errs, field.Invalid(ap.Child("targetCPUUtilizationPercentage"), *t, "must be between 1 and 100"))
		}
	}
	return errs
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// registryStrategies are the workload registry's strategies by group/version/kind.
var registryStrategies = sync.OnceValue(func() map[schema.GroupVersionKind]registry.Strategy {
	out := map[schema.GroupVersionKind]registry.Strategy{}
	for _, k := range workload.Kinds() {
		out[schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}] = k.Strategy
	}
	return out
})

// componentUpstreamErrors validates the objects c would be written as, through the same
// upstream strategies the API server runs on them. What c uses is stood in for by its
// names (connection keys are unknown at admission; a Volume counts as shared).
func componentUpstreamErrors(c *v1alpha1.Component) field.ErrorList {
	var in componentInputs
	var volumeUses []int
	for i, u := range c.Spec.Uses {
		r := componentUseInput{ComponentUse: u}
		if u.Kind == "Volume" {
			r.Claim = u.Name + "-volume"
			volumeUses = append(volumeUses, i)
		} else {
			r.Secret = v1alpha1.ConnectionSecretName(u.Name, u.Kind)
		}
		in.Uses = append(in.Uses, r)
	}
	name := c.Name
	if name == "" {
		name = "component" // generateName: any valid name stands in
	}
	c = c.DeepCopy()
	c.Name, c.UID = name, "00000000-0000-0000-0000-000000000000"
	objs, err := buildComponent(c, in)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	var errs field.ErrorList
	list := []client.Object{objs.Workload}
	if objs.Service != nil {
		list = append(list, objs.Service)
	}
	if objs.HPA != nil {
		list = append(list, objs.HPA)
	}
	for _, obj := range list {
		u, err := componentApplyBody(obj)
		if err != nil {
			return append(errs, field.InternalError(field.NewPath("spec"), err))
		}
		st := registryStrategies()[u.GroupVersionKind()]
		if st == nil {
			continue
		}
		// As the API server's create handler: system fields are set before validation.
		u.SetUID("00000000-0000-0000-0000-000000000001")
		u.SetCreationTimestamp(metav1.Now())
		st.PrepareForCreate(u)
		for _, e := range st.Validate(u) {
			e.Field = componentFieldPath(u.GetKind(), e.Field, volumeUses)
			errs = append(errs, e)
		}
	}
	return errs
}

var indexRE = regexp.MustCompile(`^\[(\d+)\](.*)$`)

// componentFieldPath puts a field path of a generated object back under the Component's
// spec: the container's fields (image, env, ports → exposes, volumeMounts and the pod's
// volumes → the Volume's entry of uses), the schedule, the HPA's bounds. Paths it cannot
// place are kept, under spec.
func componentFieldPath(kind, p string, volumeUses []int) string {
	useOf := func(rest string) string {
		m := indexRE.FindStringSubmatch(rest)
		if m == nil {
			return "spec.uses"
		}
		i, _ := strconv.Atoi(m[1])
		if i < len(volumeUses) {
			return fmt.Sprintf("spec.uses[%d]%s", volumeUses[i], m[2])
		}
		return "spec.uses" + m[2]
	}
	switch kind {
	case "Service":
		if r, ok := strings.CutPrefix(p, "spec.ports"); ok {
			return "spec.exposes" + r
		}
		return p
	case "HorizontalPodAutoscaler":
		switch {
		case strings.HasPrefix(p, "spec.minReplicas"):
			return "spec.autoscaling.minReplicas"
		case strings.HasPrefix(p, "spec.maxReplicas"):
			return "spec.autoscaling.maxReplicas"
		case strings.HasPrefix(p, "spec.metrics"):
			return "spec.autoscaling.targetCPUUtilizationPercentage"
		}
		return "spec.autoscaling"
	}
	pod := "spec.template.spec."
	if kind == "CronJob" {
		pod = "spec.jobTemplate.spec.template.spec."
	}
	rest, ok := strings.CutPrefix(p, pod)
	if !ok {
		return p
	}
	if r, ok := strings.CutPrefix(rest, "volumes"); ok {
		return useOf(r)
	}
	r, ok := strings.CutPrefix(rest, "containers[0].")
	if !ok {
		return "spec." + rest
	}
	switch {
	case strings.HasPrefix(r, "ports"):
		return "spec.exposes" + strings.TrimPrefix(r, "ports")
	case strings.HasPrefix(r, "volumeMounts"):
		return useOf(strings.TrimPrefix(r, "volumeMounts"))
	}
	return "spec." + r
}
