package workload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestBindingTopologyLabels: a pods/binding create runs admission, as kube-apiserver's
// create handler does for every create. PodTopologyLabels (on by default since 1.35) copies
// the node's zone and region onto the Binding, and the binding copies the Binding's labels
// onto the pod; the node's other labels stay off the pod.
func TestBindingTopologyLabels(t *testing.T) {
	cs := clientset(t)
	ns := "binding-topology"
	makeNS(t, cs, ns)
	// Unschedulable, so that the scheduler leaves it to this test (a binding does not check).
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "zoned", Labels: map[string]string{
		"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1", "example.com/rack": "7"}},
		Spec: corev1.NodeSpec{Unschedulable: true}}
	if _, err := cs.CoreV1().Nodes().Create(ctxT(t), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(ctxT(t), "zoned", metav1.DeleteOptions{}) })
	pods := cs.CoreV1().Pods(ns)
	// The plugin reads nodes from an informer: a pod created on the node gets the labels
	// (the plugin's other half) once the informer has the node.
	i := 0
	err := wait.PollUntilContextTimeout(ctxT(t), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		probe := newPod(fmt.Sprintf("probe-%d", i), nil)
		probe.Spec.NodeName = "zoned"
		got, err := pods.Create(ctx, probe, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return got.Labels["topology.kubernetes.io/zone"] == "z1", nil
	})
	if err != nil {
		t.Fatalf("a pod created on the zoned node never got its zone label: %v", err)
	}
	p := newPod("p", map[string]string{"app": "web"})
	p.Spec.NodeSelector = map[string]string{"example.com/never": "x"}
	if _, err := pods.Create(ctxT(t), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"example.com/bound-by": "test"}},
		Target: corev1.ObjectReference{Kind: "Node", Name: "zoned"}}
	if err := pods.Bind(ctxT(t), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctxT(t), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "web", "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1", "example.com/bound-by": "test"}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
		}
	}
	if _, ok := got.Labels["example.com/rack"]; ok {
		t.Errorf("the node's non-topology label reached the pod: %v", got.Labels)
	}
}

// TestEvictionAdmission: a policy registered for pods/eviction is called on an eviction,
// as on kube-apiserver (evictions are creates of the subresource).
func TestEvictionAdmission(t *testing.T) {
	cs := clientset(t)
	ns := "eviction-admission"
	makeNS(t, cs, ns)
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctxT(t), newPod("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-evictions-in-eviction-admission"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.kind != 'Eviction' || request.namespace != '" + ns + "'", Message: "evictions are paused"}},
		},
	}
	vap := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := vap.Create(ctxT(t), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vap.Delete(ctxT(t), policy.Name, metav1.DeleteOptions{}) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	vapb := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := vapb.Create(ctxT(t), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vapb.Delete(ctxT(t), binding.Name, metav1.DeleteOptions{}) })
	// Policies take effect once the server's policy informers have them.
	var last error
	err := wait.PollUntilContextTimeout(ctxT(t), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}})
		return last != nil, nil
	})
	if err != nil {
		t.Fatalf("the eviction was never refused by the policy (last answer %v)", last)
	}
	if !apierrors.IsInvalid(last) && !apierrors.IsForbidden(last) || !strings.Contains(last.Error(), "evictions are paused") {
		t.Fatalf("eviction under a denying policy: %v", last)
	}
}

// TestLastFinalizerDeletes: an update that removes the last finalizer of an object being
// deleted deletes it in that update, as kube-apiserver's store does: watchers see one
// DELETED event and never the object without its finalizer. A pod whose grace period runs
// stays until its final delete.
func TestLastFinalizerDeletes(t *testing.T) {
	cs := clientset(t)
	ns := "last-finalizer"
	makeNS(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctxT(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctxT(t), "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctxT(t), metav1.ListOptions{ResourceVersion: cm.ResourceVersion, FieldSelector: "metadata.name=held"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := cms.Patch(ctxT(t), "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctxT(t), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after its last finalizer went: %v", err)
	}
	var seen []string
	for ev := range w.ResultChan() {
		m, _ := ev.Object.(*corev1.ConfigMap)
		if m == nil {
			t.Fatalf("watch: %v", ev.Object)
		}
		seen = append(seen, string(ev.Type)+" finalizers="+strings.Join(m.Finalizers, ","))
		if ev.Type == watch.Deleted {
			break
		}
	}
	// The delete's MODIFIED (deletionTimestamp set, finalizer kept), then DELETED.
	if len(seen) != 2 || seen[0] != "MODIFIED finalizers=example.com/hold" || !strings.HasPrefix(seen[1], "DELETED") {
		t.Errorf("events: %q, want the delete's MODIFIED and one DELETED", seen)
	}

	// A bound pod held by a finalizer, deleted with a grace period: removing the finalizer
	// leaves it Terminating for its node agent.
	pods := cs.CoreV1().Pods(ns)
	p := newPod("graceful", nil)
	p.Finalizers = []string{"example.com/hold"}
	p.Spec.NodeSelector = map[string]string{"example.com/never": "x"}
	if _, err := pods.Create(ctxT(t), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bind(t, cs, ns, "graceful", "node-1"); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctxT(t), "graceful", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(ctxT(t), "graceful", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctxT(t), "graceful", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("a pod in its grace period after its finalizer went: %v %v", got, err)
	}
	if err := pods.Delete(ctxT(t), "graceful", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctxT(t), "graceful", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the final delete: %v", err)
	}
}

// TestJobGeneratedLabels: a Job created without labels gets its template's labels, the
// generated selector labels included, as upstream's defaulting aliases the two maps; a Job
// with labels of its own keeps exactly those.
func TestJobGeneratedLabels(t *testing.T) {
	cs := clientset(t)
	ns := "job-labels"
	makeNS(t, cs, ns)
	jobs := cs.BatchV1().Jobs(ns)
	job := func(name string, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "batch"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	}
	bare, err := jobs.Create(ctxT(t), job("bare", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(bare.UID)
	want := map[string]string{"app": "batch", "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid,
		"job-name": "bare", "batch.kubernetes.io/job-name": "bare"}
	if len(bare.Labels) != len(want) {
		t.Errorf("labels of a Job created without any: %v, want %v", bare.Labels, want)
	}
	for k, v := range want {
		if bare.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, bare.Labels[k], v)
		}
	}
	own, err := jobs.Create(ctxT(t), job("own", map[string]string{"team": "a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(own.Labels) != 1 || own.Labels["team"] != "a" {
		t.Errorf("labels of a Job created with its own: %v", own.Labels)
	}
	if own.Spec.Template.Labels["batch.kubernetes.io/controller-uid"] != string(own.UID) {
		t.Errorf("template labels: %v", own.Spec.Template.Labels)
	}
}

// TestUnservedGroupNotFound: a path of a group-version nothing serves gets kube-apiserver's
// plain-text 404 (which client-go words itself); a served group-version's unknown resource
// gets a Status.
func TestUnservedGroupNotFound(t *testing.T) {
	cfg := adminConfig(t)
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tr}
	for _, tc := range []struct {
		path, contentType, body string
	}{
		{"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "text/plain; charset=utf-8", "404 page not found\n"},
		{"/apis/metrics.k8s.io/v1beta1", "text/plain; charset=utf-8", "404 page not found\n"},
		{"/apis/apps/v9/deployments", "text/plain; charset=utf-8", "404 page not found\n"},
		{"/api/v1/nopes", "application/json", `"reason":"NotFound"`},
	} {
		res, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != tc.contentType || !strings.Contains(string(body), tc.body) {
			t.Errorf("GET %s: %d %q %q, want 404 %q with %q", tc.path, res.StatusCode, res.Header.Get("Content-Type"), body, tc.contentType, tc.body)
		}
	}
	// client-go's words for the plain-text answer, as the HPA controller logs them.
	err = clientset(t).CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").Do(ctxT(t)).Error()
	if !apierrors.IsNotFound(err) {
		t.Errorf("client-go: %v", err)
	}
}
