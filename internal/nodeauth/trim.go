package nodeauth

import (
	corev1 "k8s.io/api/core/v1"
)

// trimPod is the graph informer's transform: it keeps of a pod only what upstream's graph
// populator and Graph.AddPod read — its identity and annotations (mirror pods), node,
// service account, volumes, image pull secrets, resource claims and their statuses, and of
// each container its name and the env and envFrom that name Secrets and ConfigMaps
// (podutil.VisitPodSecretNames and VisitPodConfigmapNames) — so that the graph's informer
// does not hold a second full copy of every pod beside the API server's cache. Other
// objects pass unchanged.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: pod.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:           pod.Spec.NodeName,
			ServiceAccountName: pod.Spec.ServiceAccountName,
			Volumes:            pod.Spec.Volumes,
			ImagePullSecrets:   pod.Spec.ImagePullSecrets,
			ResourceClaims:     pod.Spec.ResourceClaims,
			Containers:         refsOnly(pod.Spec.Containers),
			InitContainers:     refsOnly(pod.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			ResourceClaimStatuses:       pod.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: pod.Status.ExtendedResourceClaimStatus,
		},
	}
	out.ManagedFields = nil
	for _, c := range pod.Spec.EphemeralContainers {
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Env: c.Env, EnvFrom: c.EnvFrom}})
	}
	return out, nil
}

func refsOnly(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Env: c.Env, EnvFrom: c.EnvFrom}
	}
	return out
}
