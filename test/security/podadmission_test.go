package security

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/server/servertest"
)

// namespace creates a namespace for one test and waits for its default ServiceAccount (the
// serviceaccount controller's), without which the ServiceAccount plugin refuses pods.
func namespace(t *testing.T, name string) string {
	t.Helper()
	must(t, "", "create", "namespace", name)
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		_, errOut, err := podadmissionRun(t, "", "get", "serviceaccount", "default", "-n", name)
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	return name
}

// getPod reads a pod as admin.
func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(must(t, "", "get", "pod", name, "-n", ns, "-o", "json")), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

func podYAML(ns, name, extraSpec, containerExtra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
%s  containers:
  - name: c
    image: nginx
%s`, name, ns, extraSpec, containerExtra)
}

const privilegedContainer = `    securityContext:
      privileged: true
`

// TestDefaultServiceAccount: every namespace gets a default ServiceAccount, re-created when
// deleted (the serviceaccount controller).
func TestDefaultServiceAccount(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "sa-controller")
	must(t, "", "delete", "serviceaccount", "default", "-n", ns)
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		_, errOut, err := podadmissionRun(t, "", "get", "serviceaccount", "default", "-n", ns)
		if err != nil {
			return fmt.Errorf("not re-created: %s", errOut)
		}
		return nil
	})
}

// TestImmortalNamespaces: NamespaceLifecycle refuses to delete the system namespaces.
func TestImmortalNamespaces(t *testing.T) {
	podadmissionSuite.Need(t)
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		// Dry run: were the refusal missing, the namespace would stay.
		_, errOut, err := podadmissionRun(t, "", "delete", "namespace", ns, "--dry-run=server")
		want := fmt.Sprintf(`namespaces %q is forbidden: this namespace may not be deleted`, ns)
		if err == nil || !strings.Contains(errOut, want) {
			t.Fatalf("delete namespace %s: err %v, stderr %q, want %q", ns, err, errOut, want)
		}
	}
}

// TestPodDefaults: a pod gets the default ServiceAccount and its kube-api-access projected
// volume, the two NoExecute tolerations of DefaultTolerationSeconds, and the priority of
// its priorityClassName.
func TestPodDefaults(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "pod-defaults")
	must(t, podYAML(ns, "p", "  priorityClassName: system-cluster-critical\n", ""), "create", "-f", "-")
	pod := getPod(t, ns, "p")
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName = %q, want default", pod.Spec.ServiceAccountName)
	}
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if strings.HasPrefix(pod.Spec.Volumes[i].Name, "kube-api-access-") {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != 3 || vol.Projected.Sources[0].ServiceAccountToken == nil ||
		vol.Projected.Sources[1].ConfigMap == nil || vol.Projected.Sources[1].ConfigMap.Name != "kube-root-ca.crt" {
		t.Errorf("no kube-api-access projected volume (token, kube-root-ca.crt, namespace): %+v", pod.Spec.Volumes)
	} else if m := pod.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].Name != vol.Name ||
		m[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" || !m[0].ReadOnly {
		t.Errorf("volume mounts = %+v", m)
	}
	seconds := map[string]int64{}
	for _, tol := range pod.Spec.Tolerations {
		if tol.Effect == corev1.TaintEffectNoExecute && tol.Operator == corev1.TolerationOpExists && tol.TolerationSeconds != nil {
			seconds[tol.Key] = *tol.TolerationSeconds
		}
	}
	if len(pod.Spec.Tolerations) != 2 || seconds["node.kubernetes.io/not-ready"] != 300 || seconds["node.kubernetes.io/unreachable"] != 300 {
		t.Errorf("tolerations = %+v, want not-ready and unreachable NoExecute for 300 s", pod.Spec.Tolerations)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 2000000000 {
		t.Errorf("priority = %v, want 2000000000 (system-cluster-critical)", pod.Spec.Priority)
	}
	_, errOut, err := podadmissionRun(t, podYAML(ns, "q", "  priorityClassName: no-such-class\n", ""), "create", "-f", "-")
	if err == nil || !strings.Contains(errOut, `no PriorityClass with name no-such-class was found`) {
		t.Errorf("unknown priority class: err %v, stderr %q", err, errOut)
	}
}

// TestLimitRangeDefaults: LimitRanger fills a container's missing requests and limits from
// the namespace's LimitRange.
func TestLimitRangeDefaults(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "limitrange")
	must(t, `apiVersion: v1
kind: LimitRange
metadata:
  name: lr
spec:
  limits:
  - type: Container
    default:
      cpu: 500m
      memory: 256Mi
    defaultRequest:
      cpu: 100m
      memory: 64Mi
`, "create", "-n", ns, "-f", "-")
	// The plugin reads LimitRanges from an informer: the first pod may come before it knows.
	servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		_, _, _ = podadmissionRun(t, "", "delete", "pod", "p", "-n", ns, "--ignore-not-found", "--grace-period=0", "--force")
		if _, errOut, err := podadmissionRun(t, podYAML(ns, "p", "", ""), "create", "-f", "-"); err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		res := getPod(t, ns, "p").Spec.Containers[0].Resources
		want := corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
		if !equalResources(res.Limits, want.Limits) || !equalResources(res.Requests, want.Requests) {
			return fmt.Errorf("resources = %+v, want %+v", res, want)
		}
		return nil
	})
	if a := getPod(t, ns, "p").Annotations["kubernetes.io/limit-ranger"]; !strings.Contains(a, "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c") {
		t.Errorf("limit-ranger annotation = %q", a)
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if q, ok := a[k]; !ok || q.Cmp(v) != 0 {
			return false
		}
	}
	return true
}

// TestPodSecurityEnforce: a restricted namespace refuses pods that break the restricted
// profile with PodSecurity's message, a privileged pod among them.
func TestPodSecurityEnforce(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "psa-restricted")
	must(t, "", "label", "ns", ns, "pod-security.kubernetes.io/enforce=restricted")
	const restricted = `allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	cases := []struct{ name, container, want string }{
		{"plain", "", `pods "plain" is forbidden: violates PodSecurity "restricted:latest": ` + restricted},
		// Needs privileged containers allowed by validation (kube-apiserver --allow-privileged=true,
		// as every real cluster runs it); otherwise validation refuses first.
		{"privileged", privilegedContainer, `pods "privileged" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), ` + restricted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The plugin reads namespace labels from an informer; the label shows within moments.
			servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
				_, errOut, err := podadmissionRun(t, podYAML(ns, tc.name, "", tc.container), "create", "-f", "-")
				if err == nil {
					_, _, _ = podadmissionRun(t, "", "delete", "pod", tc.name, "-n", ns, "--grace-period=0", "--force")
					return fmt.Errorf("pod admitted")
				}
				if !strings.Contains(errOut, tc.want) {
					t.Fatalf("stderr %q\nwant %q", errOut, tc.want)
				}
				return nil
			})
		})
	}
}

const hostPathVolume = `  volumes:
  - name: host
    hostPath:
      path: /tmp
`

// TestPodSecurityWarn: warn mode admits the pod and answers with a Warning header, which
// kubectl prints (1.27 and 1.33).
func TestPodSecurityWarn(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "psa-warn")
	must(t, "", "label", "ns", ns, "pod-security.kubernetes.io/warn=baseline")
	for _, version := range []string{"1.27", "1.33"} {
		bin, err := servertest.FindKubectl(version)
		if err != nil {
			t.Fatal(err)
		}
		name := "host-" + strings.ReplaceAll(version, ".", "-")
		servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
			_, _, _ = podadmissionRun(t, "", "delete", "pod", name, "-n", ns, "--ignore-not-found", "--grace-period=0", "--force")
			_, errOut, err := servertest.RunKubectl(bin, podadmissionHome, podadmissionSrv.Kubeconfig, podYAML(ns, name, hostPathVolume, ""), "create", "-f", "-")
			if err != nil {
				t.Fatalf("kubectl %s: warn mode refused the pod: %v %s", version, err, errOut)
			}
			want := `Warning: would violate PodSecurity "baseline:latest": hostPath volumes (volume "host")`
			if !strings.Contains(errOut, want) {
				return fmt.Errorf("kubectl %s: stderr %q, want %q", version, errOut, want)
			}
			return nil
		})
	}
	// Enforcing a level on a namespace warns about its existing pods: PodSecurity lists
	// them (from the server's pod cache).
	_, errOut, err := podadmissionRun(t, "", "label", "ns", ns, "pod-security.kubernetes.io/enforce=baseline")
	if err != nil {
		t.Fatalf("label: %v %s", err, errOut)
	}
	for _, want := range []string{`Warning: existing pods in namespace "` + ns + `" violate the new PodSecurity enforce level "baseline:latest"`,
		`Warning: host-1-27 (and 1 other pod): hostPath volumes`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("enforcing baseline on a namespace with hostPath pods: stderr %q, want %q", errOut, want)
		}
	}
}

// TestResourceQuota: a pod past the quota's CPU limit is refused with upstream's message.
// The quota controller (upstream's, run by the server) writes the quota's first status; the
// test waits for it (a status write of its own raced the controller's and met a conflict).
func TestResourceQuota(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "quota")
	must(t, "", "create", "quota", "q", "--hard=limits.cpu=1,pods=2", "-n", ns)
	cs := clientset(t)
	ctx := context.Background()
	var q *corev1.ResourceQuota
	var err error
	servertest.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if q, err = cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{}); err != nil {
			return err
		}
		used, ok := q.Status.Used[corev1.ResourceLimitsCPU]
		if hard := q.Status.Hard[corev1.ResourceLimitsCPU]; hard.String() != "1" || !ok || !used.IsZero() {
			return fmt.Errorf("quota status not synced yet: %+v", q.Status)
		}
		return nil
	})
	limits := func(cpu string) string {
		return fmt.Sprintf("    resources:\n      limits:\n        cpu: %s\n", cpu)
	}
	servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		_, errOut, err := podadmissionRun(t, podYAML(ns, "big", "", limits("2")), "create", "-f", "-")
		want := `pods "big" is forbidden: exceeded quota: q, requested: limits.cpu=2, used: limits.cpu=0, limited: limits.cpu=1`
		if err == nil {
			t.Fatal("a pod past the quota was admitted")
		}
		if !strings.Contains(errOut, want) {
			return fmt.Errorf("stderr %q, want %q", errOut, want)
		}
		return nil
	})
	// Within the quota: admitted, and the plugin charges it in status.used.
	must(t, podYAML(ns, "small", "", limits("600m")), "create", "-f", "-")
	q, err = cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used[corev1.ResourceLimitsCPU]; used.String() != "600m" {
		t.Errorf("status.used limits.cpu = %s, want 600m", used.String())
	}
	_, errOut, err := podadmissionRun(t, podYAML(ns, "second", "", limits("600m")), "create", "-f", "-")
	want := `pods "second" is forbidden: exceeded quota: q, requested: limits.cpu=600m, used: limits.cpu=600m, limited: limits.cpu=1`
	if err == nil || !strings.Contains(errOut, want) {
		t.Errorf("second pod: err %v, stderr %q, want %q", err, errOut, want)
	}
}

// TestNodeRestriction: a node (system:node:<name> in system:nodes) may not change another
// node's Node nor the status of pods bound elsewhere. RBAC grants the nodes the verbs here
// (the Node authorizer is not part of this test), so the refusals are NodeRestriction's.
func TestNodeRestriction(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "noderestriction")
	must(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: test-nodes
rules:
- apiGroups: [""]
  resources: [nodes, nodes/status, pods, pods/status]
  verbs: [get, list, update, patch]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: test-nodes
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: test-nodes
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes
`, "create", "-f", "-")
	for _, n := range []string{"node-x", "node-y"} {
		must(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n", n), "create", "-f", "-")
	}
	must(t, podYAML(ns, "on-y", "  nodeName: node-y\n", ""), "create", "-f", "-")
	must(t, podYAML(ns, "on-x", "  nodeName: node-x\n", ""), "create", "-f", "-")
	x := userKubeconfig(t, "system:node:node-x", "system:nodes")
	asX := func(args ...string) (string, error) {
		_, errOut, err := servertest.RunKubectl(podadmissionKubectl, podadmissionHome, x, "", args...)
		return errOut, err
	}
	// RBAC snapshots follow the binding within moments.
	servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if errOut, err := asX("label", "node", "node-x", "mine=yes", "--overwrite"); err != nil {
			return fmt.Errorf("node-x labelling itself: %v %s", err, errOut)
		}
		return nil
	})
	errOut, err := asX("label", "node", "node-y", "stolen=yes")
	if want := `nodes "node-y" is forbidden: node "node-x" is not allowed to modify node "node-y"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("node-x labelling node-y: err %v, stderr %q, want %q", err, errOut, want)
	}
	patch := `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
	errOut, err = asX("patch", "pod", "on-y", "-n", ns, "--subresource=status", "--type=merge", "-p", patch)
	if want := `node "node-x" can only update pod status for pods with spec.nodeName set to itself`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("node-x patching the status of a pod on node-y: err %v, stderr %q, want %q", err, errOut, want)
	}
	if errOut, err := asX("patch", "pod", "on-x", "-n", ns, "--subresource=status", "--type=merge", "-p", patch); err != nil {
		t.Errorf("node-x patching the status of its own pod: %v %s", err, errOut)
	}
	// An eviction is a create of pods/eviction and goes through admission: NodeRestriction
	// looks the pod up (in the server's pod cache) and lets a node evict only its own pods.
	xcfg, err := clientcmd.BuildConfigFromFlags("", x)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(xcfg)
	if err != nil {
		t.Fatal(err)
	}
	err = cs.CoreV1().Pods(ns).EvictV1(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "on-y", Namespace: ns}})
	if want := `node node-x can only evict pods with spec.nodeName set to itself`; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("node-x evicting a pod on node-y: %v, want 403 %q", err, want)
	}
	if err := cs.CoreV1().Pods(ns).EvictV1(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "on-x", Namespace: ns}}); err != nil {
		t.Errorf("node-x evicting its own pod: %v", err)
	}
}

// TestNodeTaint: a new Node carries the not-ready NoSchedule taint (TaintNodesByCondition).
func TestNodeTaint(t *testing.T) {
	podadmissionSuite.Need(t)
	// The create's answer: the node lifecycle controller removes the taint soon after from a
	// node with no Ready condition, as kube-controller-manager's does.
	out := must(t, "apiVersion: v1\nkind: Node\nmetadata:\n  name: tainted\n", "create", "-f", "-", "-o", "json")
	var node corev1.Node
	if err := json.Unmarshal([]byte(out), &node); err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "node.kubernetes.io/not-ready" || node.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Fatalf("taints = %+v, want node.kubernetes.io/not-ready:NoSchedule", node.Spec.Taints)
	}
}

// TestClaims: a claim without a class gets the default StorageClass (DefaultStorageClass)
// and the pvc-protection finalizer (StorageObjectInUseProtection).
func TestClaims(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "claims")
	must(t, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: example.com/local
`, "create", "-f", "-")
	claim := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n", name, ns)
	}
	// The plugin reads StorageClasses from an informer: the first claim may come before it knows.
	i := 0
	servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		i++
		name := fmt.Sprintf("c%d", i)
		must(t, claim(name), "create", "-f", "-")
		var pvc corev1.PersistentVolumeClaim
		if err := json.Unmarshal([]byte(must(t, "", "get", "pvc", name, "-n", ns, "-o", "json")), &pvc); err != nil {
			t.Fatal(err)
		}
		if len(pvc.Finalizers) != 1 || pvc.Finalizers[0] != "kubernetes.io/pvc-protection" {
			t.Fatalf("finalizers = %v, want kubernetes.io/pvc-protection", pvc.Finalizers)
		}
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" {
			return fmt.Errorf("storageClassName = %v, want standard", pvc.Spec.StorageClassName)
		}
		return nil
	})
}

// TestRuntimeClass: a pod naming a RuntimeClass that does not exist is refused; one that
// exists sets the pod's overhead.
func TestRuntimeClass(t *testing.T) {
	podadmissionSuite.Need(t)
	ns := namespace(t, "runtimeclass")
	_, errOut, err := podadmissionRun(t, podYAML(ns, "p", "  runtimeClassName: missing\n", ""), "create", "-f", "-")
	if want := `pods "p" is forbidden: pod rejected: RuntimeClass "missing" not found`; err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("err %v, stderr %q, want %q", err, errOut, want)
	}
	must(t, "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: sandboxed\nhandler: runsc\noverhead:\n  podFixed:\n    cpu: 250m\n", "create", "-f", "-")
	servertest.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		_, errOut, err := podadmissionRun(t, podYAML(ns, "q", "  runtimeClassName: sandboxed\n", ""), "create", "-f", "-")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	if o := getPod(t, ns, "q").Spec.Overhead; o.Cpu().String() != "250m" {
		t.Fatalf("overhead = %v, want cpu 250m", o)
	}
}
