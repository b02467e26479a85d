package builtin

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/apiserver/request"
)

func isBadRequest(err error) bool { return apierrors.IsBadRequest(err) }

// These tests run upstream's plugins through the adapter on client-go's fake clientset (the
// end-to-end tests in test/security (its podadmission suite) run them in the real server).

func startBuiltin(t *testing.T, objs ...runtime.Object) *Builtin {
	t.Helper()
	b, err := newBuiltin(fake.NewClientset(objs...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
}

func defaultSA(ns string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
}

func toU(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func fromU[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func testPod(ns string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

var admin = &request.User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}

func createPod(t *testing.T, pod *corev1.Pod) *admission.Attributes {
	return &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Resource: pods,
		Namespace: pod.Namespace, Name: pod.Name, Namespaced: true, Object: toU(t, pod), User: admin}
}

// admitAndValidate runs the whole built-in chain as the REST handler would.
func admitAndValidate(ctx context.Context, b *Builtin, a *admission.Attributes) error {
	if err := b.Admit(ctx, a); err != nil {
		return err
	}
	if err := b.Validate(ctx, a); err != nil {
		return err
	}
	return b.Quota().Validate(ctx, a)
}

func TestEnabledInUpstreamOrder(t *testing.T) {
	b := startBuiltin(t)
	want := []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "NodeRestriction", "TaintNodesByCondition",
		"PodSecurity", "Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection",
		"PersistentVolumeClaimResize", "RuntimeClass", "PodTopologyLabels", "ResourceQuota"}
	if got := strings.Join(b.Enabled(), ","); got != strings.Join(want, ",") {
		t.Fatalf("enabled = %s\nwant      %s", got, strings.Join(want, ","))
	}
}

func TestNotServedLeftOut(t *testing.T) {
	b, err := newBuiltin(fake.NewClientset(), Options{Served: func(gvr schema.GroupVersionResource) bool { return gvr != priorityClasses && gvr != resourceQuotas }})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range b.Enabled() {
		if n == "Priority" || n == "ResourceQuota" {
			t.Fatalf("%s enabled though its resource is not served", n)
		}
	}
	// ResourceQuota left out admits everything.
	if err := b.Quota().Validate(context.Background(), createPod(t, testPod("ns", nil))); err != nil {
		t.Fatal(err)
	}
}

// TestPodDefaults: ServiceAccount mounts the token volume, DefaultTolerationSeconds adds the
// two NoExecute tolerations, Priority resolves the class, LimitRanger applies defaults —
// written back into the request's object.
func TestPodDefaults(t *testing.T) {
	b := startBuiltin(t, namespace("ns", nil), defaultSA("ns"),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}})
	a := createPod(t, testPod("ns", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }))
	if err := admitAndValidate(context.Background(), b, a); err != nil {
		t.Fatal(err)
	}
	pod := fromU[corev1.Pod](t, a.Object)
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName = %q", pod.Spec.ServiceAccountName)
	}
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if strings.HasPrefix(pod.Spec.Volumes[i].Name, "kube-api-access-") {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) == 0 || vol.Projected.Sources[0].ServiceAccountToken == nil {
		t.Errorf("no projected kube-api-access volume: %+v", pod.Spec.Volumes)
	} else if m := pod.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].Name != vol.Name || m[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
		t.Errorf("volume mounts = %+v", m)
	}
	tolerations := map[string]int64{}
	for _, tol := range pod.Spec.Tolerations {
		if tol.Effect == corev1.TaintEffectNoExecute && tol.TolerationSeconds != nil {
			tolerations[tol.Key] = *tol.TolerationSeconds
		}
	}
	if tolerations["node.kubernetes.io/not-ready"] != 300 || tolerations["node.kubernetes.io/unreachable"] != 300 {
		t.Errorf("tolerations = %+v", pod.Spec.Tolerations)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 2000000000 {
		t.Errorf("priority = %v", pod.Spec.Priority)
	}
	res := pod.Spec.Containers[0].Resources
	if res.Limits.Cpu().String() != "500m" || res.Requests.Cpu().String() != "100m" {
		t.Errorf("resources = %+v", res)
	}
	if pod.Annotations["kubernetes.io/limit-ranger"] == "" {
		t.Errorf("no limit-ranger annotation: %v", pod.Annotations)
	}
}

func TestServiceAccountMissing(t *testing.T) {
	b := startBuiltin(t, namespace("ns", nil))
	err := admitAndValidate(context.Background(), b, createPod(t, testPod("ns", nil)))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `serviceaccount "default" not found`) {
		t.Fatalf("err = %v", err)
	}
}

// TestUnchangedNotWrittenBack: an object no plugin changes keeps its content (the very map).
func TestUnchangedNotWrittenBack(t *testing.T) {
	b := startBuiltin(t, namespace("ns", nil))
	cm := toU(t, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}})
	content := cm.Object
	a := &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: "ns", Name: "c", Namespaced: true, Object: cm, User: admin}
	if err := admitAndValidate(context.Background(), b, a); err != nil {
		t.Fatal(err)
	}
	content["probe"] = true
	if a.Object.Object["probe"] != true {
		t.Fatal("the object's content was replaced though no plugin changed it")
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	terminating := namespace("gone", nil)
	terminating.Status.Phase = corev1.NamespaceTerminating
	b := startBuiltin(t, terminating)
	err := admitAndValidate(context.Background(), b, createPod(t, testPod("gone", nil)))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "unable to create new content in namespace gone because it is being terminated") {
		t.Fatalf("create in terminating namespace: %v", err)
	}
	err = admitAndValidate(context.Background(), b, &admission.Attributes{Operation: admission.Delete, Kind: corev1.SchemeGroupVersion.WithKind("Namespace"),
		Resource: namespaces, Name: "kube-system", User: admin})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "this namespace may not be deleted") {
		t.Fatalf("delete kube-system: %v", err)
	}
}

// warnings collects what the plugins add as Warning headers.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) ctx() context.Context {
	return request.WithWarner(context.Background(), func(s string) { w.mu.Lock(); w.list = append(w.list, s); w.mu.Unlock() })
}

func privileged(p *corev1.Pod) {
	yes := true
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
}

func TestPodSecurity(t *testing.T) {
	b := startBuiltin(t,
		namespace("enforced", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}), defaultSA("enforced"),
		namespace("warned", map[string]string{"pod-security.kubernetes.io/warn": "baseline"}), defaultSA("warned"))
	var w warnings
	err := admitAndValidate(w.ctx(), b, createPod(t, testPod("enforced", privileged)))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)`) {
		t.Fatalf("privileged pod in a restricted namespace: %v", err)
	}
	if err := admitAndValidate(w.ctx(), b, createPod(t, testPod("warned", privileged))); err != nil {
		t.Fatalf("warn mode refused: %v", err)
	}
	if len(w.list) != 1 || !strings.Contains(w.list[0], `would violate PodSecurity "baseline:latest": privileged`) {
		t.Fatalf("warnings = %q", w.list)
	}
}

func TestResourceQuota(t *testing.T) {
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("2")}},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("2")},
			Used: corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("0"), corev1.ResourcePods: resource.MustParse("0")}}}
	b := startBuiltin(t, namespace("ns", nil), defaultSA("ns"), quota)
	big := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	err := admitAndValidate(context.Background(), b, createPod(t, testPod("ns", big)))
	want := "exceeded quota: q, requested: limits.cpu=2, used: limits.cpu=0, limited: limits.cpu=1"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant %q", err, want)
	}
	noLimits := func(p *corev1.Pod) {}
	err = admitAndValidate(context.Background(), b, createPod(t, testPod("ns", noLimits)))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must specify limits.cpu") {
		t.Fatalf("pod without limits: %v", err)
	}
}

func TestNodeRestriction(t *testing.T) {
	n1 := &request.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n2", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	b := startBuiltin(t, namespace("ns", nil), defaultSA("ns"), other,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}})
	node2 := toU(t, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"x": "y"}}})
	err := admitAndValidate(context.Background(), b, &admission.Attributes{Operation: admission.Update, Kind: corev1.SchemeGroupVersion.WithKind("Node"),
		Resource: nodes, Name: "n2", Object: node2, OldObject: node2.DeepCopy(), User: n1})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `node "n1" is not allowed to modify node "n2"`) {
		t.Fatalf("n1 updating node n2: %v", err)
	}
	otherU := toU(t, other)
	otherU.SetAPIVersion("v1")
	otherU.SetKind("Pod")
	err = admitAndValidate(context.Background(), b, &admission.Attributes{Operation: admission.Update, Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		Resource: pods, Subresource: "status", Namespace: "ns", Name: "p", Namespaced: true, Object: otherU, OldObject: otherU.DeepCopy(), User: n1})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `node "n1" can only update pod status for pods with spec.nodeName set to itself`) {
		t.Fatalf("n1 updating status of a pod bound to n2: %v", err)
	}
}

// TestBadPodIsBadRequest: content that does not fit the Pod type is refused with 400 by the
// chain (the plugins saw no object), not passed on.
func TestBadPodIsBadRequest(t *testing.T) {
	b := startBuiltin(t, namespace("ns", nil), defaultSA("ns"))
	a := createPod(t, testPod("ns", nil))
	a.Object.Object["spec"] = map[string]any{"containers": "nope"}
	if err := b.Admit(context.Background(), a); !apierrors.IsBadRequest(err) {
		t.Fatalf("err = %v, want BadRequest", err)
	}
}

// BenchmarkChain measures the built-in chain (Admit, Validate, Quota) per request: a pod
// (converted, changed by four plugins, written back) and a ConfigMap (no plugin reads it).
func BenchmarkChain(b *testing.B) {
	t := &testing.T{}
	bi := startBuiltin(t, namespace("ns", nil), defaultSA("ns"))
	pod := toU(t, testPod("ns", nil))
	cm := toU(t, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{"k": "v"}})
	for _, bc := range []struct {
		name string
		obj  *unstructured.Unstructured
		gvr  schema.GroupVersionResource
	}{{"pod", pod, pods}, {"configmap", cm, corev1.SchemeGroupVersion.WithResource("configmaps")}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				a := &admission.Attributes{Operation: admission.Create, Kind: bc.obj.GroupVersionKind(), Resource: bc.gvr,
					Namespace: "ns", Name: bc.obj.GetName(), Namespaced: true, Object: bc.obj.DeepCopy(), User: admin}
				if err := admitAndValidate(ctx, bi, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
