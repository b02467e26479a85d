package nodeauth

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trimPod is the graph informer's transform: it keeps of a pod only what upstream's graph
// populator and Graph.AddPod read — its identity and mirror-pod annotation, node, service
// account, the references of its volumes, image pull secrets, resource claims and their
// statuses, and of each container its name and the env and envFrom that name Secrets and
// ConfigMaps (podutil.VisitPodSecretNames and VisitPodConfigmapNames) — so that the graph's
// informer does not hold a second copy of every pod beside the API server's cache. Nothing
// of the decoded pod is shared with what is kept, so the rest is garbage at once. Other
// objects pass unchanged.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp},
		Spec: corev1.PodSpec{
			NodeName:           pod.Spec.NodeName,
			ServiceAccountName: pod.Spec.ServiceAccountName,
			Volumes:            volumeRefs(pod.Spec.Volumes),
			ImagePullSecrets:   slices.Clone(pod.Spec.ImagePullSecrets),
			ResourceClaims:     slices.Clone(pod.Spec.ResourceClaims),
			Containers:         refsOnly(pod.Spec.Containers),
			InitContainers:     refsOnly(pod.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			ResourceClaimStatuses:       slices.Clone(pod.Status.ResourceClaimStatuses),
			ExtendedResourceClaimStatus: pod.Status.ExtendedResourceClaimStatus,
		},
	}
	if v, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		out.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Env: envRefs(c.Env), EnvFrom: slices.Clone(c.EnvFrom)}})
	}
	return out, nil
}

// volumeRefs keeps of each volume what names another object: a Secret's or ConfigMap's name
// (also in projections), a claim's name, an ephemeral volume (its claim is named after the
// pod and the volume). Volumes that name nothing (emptyDir, downwardAPI, hostPath, image)
// are dropped; kinds that name Secrets in fields of their own (CSI, RBD, …) are kept whole.
func volumeRefs(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		src := v.VolumeSource
		keep := corev1.Volume{Name: v.Name}
		switch {
		case src.Secret != nil:
			keep.Secret = &corev1.SecretVolumeSource{SecretName: src.Secret.SecretName}
		case src.ConfigMap != nil:
			keep.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: src.ConfigMap.LocalObjectReference}
		case src.PersistentVolumeClaim != nil:
			keep.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.PersistentVolumeClaim.ClaimName}
		case src.Ephemeral != nil:
			keep.Ephemeral = &corev1.EphemeralVolumeSource{}
		case src.Projected != nil:
			var sources []corev1.VolumeProjection
			for _, p := range src.Projected.Sources {
				switch {
				case p.Secret != nil:
					sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: p.Secret.LocalObjectReference}})
				case p.ConfigMap != nil:
					sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: p.ConfigMap.LocalObjectReference}})
				}
			}
			if len(sources) == 0 {
				continue
			}
			keep.Projected = &corev1.ProjectedVolumeSource{Sources: sources}
		case src.EmptyDir != nil, src.DownwardAPI != nil, src.HostPath != nil, src.Image != nil:
			continue
		default:
			keep = *v.DeepCopy()
		}
		out = append(out, keep)
	}
	return out
}

// refsOnly keeps the containers whose env or envFrom name a Secret or ConfigMap, with only
// those (a Container is ~400 bytes even when empty; most pods keep none).
func refsOnly(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		env := envRefs(c.Env)
		if len(env) == 0 && len(c.EnvFrom) == 0 {
			continue
		}
		out = append(out, corev1.Container{Name: c.Name, Env: env, EnvFrom: slices.Clone(c.EnvFrom)})
	}
	return out
}

// envRefs keeps the variables whose values come from a Secret or ConfigMap, with only that
// reference.
func envRefs(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		switch {
		case e.ValueFrom.SecretKeyRef != nil:
			out = append(out, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: e.ValueFrom.SecretKeyRef.LocalObjectReference, Key: e.ValueFrom.SecretKeyRef.Key}}})
		case e.ValueFrom.ConfigMapKeyRef != nil:
			out = append(out, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: e.ValueFrom.ConfigMapKeyRef.LocalObjectReference, Key: e.ValueFrom.ConfigMapKeyRef.Key}}})
		}
	}
	return out
}
