package nodeauth

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"
)

// TestTrimPodKeepsReferences: the graph reads the same Secrets, ConfigMaps, claims, node,
// service account and mirror annotation from a trimmed pod as from the full one.
func TestTrimPodKeepsReferences(t *testing.T) {
	env := []corev1.EnvVar{
		{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}, Key: "k"}}},
		{Name: "B", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-cm"}, Key: "k"}}},
	}
	envFrom := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "from-secret"}}},
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "from-cm"}}}}
	container := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "img", Command: []string{"sh"}, Env: env, EnvFrom: envFrom,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.PodSpec{
			NodeName: "n1", ServiceAccountName: "sa", ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
			Containers: []corev1.Container{container("c")}, InitContainers: []corev1.Container{container("i")},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Image: "img",
				Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "eph-secret"}}}}}}}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
				{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
				// What the ServiceAccount plugin adds to every pod, plus a Secret projection.
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
				}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
				{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}},
				{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-secret"}}}},
			},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu")}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true}}},
	}
	obj, err := trimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*corev1.Pod)
	names := func(p *corev1.Pod, visit func(*corev1.Pod, podutil.Visitor) bool) []string {
		var out []string
		visit(p, func(n string) bool { out = append(out, n); return true })
		slices.Sort(out)
		return out
	}
	for what, visit := range map[string]func(*corev1.Pod, podutil.Visitor) bool{"secrets": podutil.VisitPodSecretNames, "configmaps": podutil.VisitPodConfigmapNames} {
		if got, want := names(trimmed, visit), names(pod, visit); !slices.Equal(got, want) {
			t.Errorf("%s: trimmed %v, full %v", what, got, want)
		}
	}
	claims := func(p *corev1.Pod) []string {
		var out []string
		for _, v := range p.Spec.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil:
				out = append(out, v.PersistentVolumeClaim.ClaimName)
			case v.Ephemeral != nil:
				out = append(out, ephemeral.VolumeClaimName(p, &v))
			}
		}
		return out
	}
	if got, want := claims(trimmed), claims(pod); !slices.Equal(got, want) {
		t.Errorf("claims: trimmed %v, full %v", got, want)
	}
	if trimmed.Spec.NodeName != "n1" || trimmed.Spec.ServiceAccountName != "sa" || trimmed.UID != "u1" || trimmed.Namespace != "ns" ||
		trimmed.Annotations[corev1.MirrorPodAnnotationKey] != "x" || len(trimmed.Spec.Volumes) != 6 ||
		len(trimmed.Spec.ResourceClaims) != 1 || len(trimmed.Status.ResourceClaimStatuses) != 1 || len(trimmed.Spec.EphemeralContainers) != 1 {
		t.Errorf("trimmed pod lost what the graph reads: %+v", trimmed)
	}
	if len(trimmed.ManagedFields) != 0 || trimmed.Spec.Containers[0].Image != "" || len(trimmed.Status.ContainerStatuses) != 0 || trimmed.Status.Phase != "" {
		t.Errorf("trimmed pod kept what the graph does not read: %+v", trimmed)
	}
	if pod.Spec.Containers[0].Image != "img" || len(pod.ManagedFields) != 1 {
		t.Error("the informer's object was changed in place")
	}
	// Other kinds pass unchanged.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if got, _ := trimPod(node); got != node {
		t.Errorf("a node was transformed: %v", got)
	}
}
