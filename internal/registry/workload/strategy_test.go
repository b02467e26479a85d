package workload

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/registry"
)

func kindOf(t testing.TB, resource string) *registry.Kind {
	t.Helper()
	for _, k := range Kinds() {
		if k.Resource == resource {
			return k
		}
	}
	t.Fatalf("no kind %s", resource)
	return nil
}

// create runs what the handler runs on a create body: defaults, then upstream's
// PrepareForCreate and validation.
func create(k *registry.Kind, body string) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetUID("u")
	obj.SetCreationTimestamp(metav1.Now())
	st := k.Strategy.(registry.ContextStrategy)
	st.PrepareForCreate(obj)
	return obj, st.ValidateCreateContext(context.Background(), obj)
}

// TestValidation: invalid objects get upstream's causes, field by field.
func TestValidation(t *testing.T) {
	cases := []struct {
		resource, body string
		causes         []string // "field: message part"
	}{
		{"pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":""}]}}`,
			[]string{"spec.containers[0].image: Required value"}},
		{"pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x","ports":[{"name":"h","containerPort":80},{"name":"h","containerPort":81}]}]}}`,
			[]string{`spec.containers[0].ports[1].name: Duplicate value: "h"`}},
		{"pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}]}}`,
			[]string{"spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"}},
		{"pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x","livenessProbe":{"exec":{"command":["x"]},"httpGet":{"port":80}}}]}}`,
			[]string{"spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type"}},
		{"pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x","resources":{"requests":{"memory":"-1"}}}]}}`,
			[]string{"spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0"}},
		{"pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x","ports":[{"containerPort":"eighty"}]}]}}`,
			[]string{"spec.containers[0].ports[0].containerPort: Invalid value"}},
		{"services", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"d"},"spec":{"type":"ExternalName"}}`,
			[]string{"spec.externalName: Required value"}},
		{"deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"c"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}`,
			[]string{"spec.template.metadata.labels: Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`"}},
		{"deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"d"},"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]},"template":{"metadata":{"labels":{"a":"c"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}`,
			[]string{"spec.selector.matchExpressions[0].operator: Invalid value: \"Bogus\": not a valid selector operator"}},
		{"jobs", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"d"},"spec":{"template":{"spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"x"}]}}}}`,
			[]string{`spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`}},
		{"cronjobs", `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c","namespace":"d"},"spec":{"schedule":"not a schedule","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"x"}]}}}}}}`,
			[]string{"spec.schedule: Invalid value: \"not a schedule\""}},
		{"priorityclasses", `{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"system-x"},"value":5}`,
			[]string{"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved"}},
		{"nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"Bad_Name"}}`,
			[]string{"metadata.name: Invalid value: \"Bad_Name\""}},
	}
	for _, c := range cases {
		_, err := create(kindOf(t, c.resource), c.body)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s %s: %v, want 422 Invalid", c.resource, c.body, err)
			continue
		}
		got := []string{}
		for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
			got = append(got, cause.Field+": "+cause.Message)
		}
		for _, want := range c.causes {
			found := false
			for _, g := range got {
				if strings.HasPrefix(g, want) || strings.Contains(g, want) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: cause %q missing in %q", c.resource, want, got)
			}
		}
	}
}

// TestConversionRoundTrip: an object stored in autoscaling/v2 reads back in v1 and v2.
func TestConversionRoundTrip(t *testing.T) {
	v2 := map[string]any{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": map[string]any{"name": "h", "namespace": "d"},
		"spec": map[string]any{"scaleTargetRef": map[string]any{"kind": "Deployment", "name": "w", "apiVersion": "apps/v1"}, "maxReplicas": int64(3),
			"metrics": []any{map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": int64(50)}}}}}}
	from := schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}
	to := from.GroupKind().WithVersion("v1")
	v1, err := convert(v2, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(v1, "spec", "targetCPUUtilizationPercentage"); got != 50 {
		t.Errorf("v1: %v", v1)
	}
	back, err := convert(v1, to, from)
	if err != nil {
		t.Fatal(err)
	}
	if m, _, _ := unstructured.NestedSlice(back, "spec", "metrics"); len(m) != 1 {
		t.Errorf("back in v2: %v", back)
	}
}

// FuzzPodCreate: whatever a client sends as a pod, the create path answers an error or an
// object, never a panic.
func FuzzPodCreate(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x"}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"},"spec":{"containers":[{"name":"a","image":"x","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}},"livenessProbe":{"httpGet":{"port":"http"}}}],"initContainers":[{"name":"i","image":"y","restartPolicy":"Always"}],"affinity":{"nodeAffinity":{}},"volumes":[{"name":"v","emptyDir":{}}]}}`,
		`{"spec":{"containers":[1]}}`, `{"spec":{"containers":[{"resources":{"requests":{"cpu":"1e1000"}}}]}}`, `{"metadata":{"name":5}}`, `{"spec":{"overhead":{"cpu":[]}}}`,
	} {
		f.Add(s)
	}
	k := kindOf(f, "pods")
	f.Fuzz(func(t *testing.T, body string) {
		obj, err := create(k, body)
		if err != nil || obj == nil {
			return
		}
		if _, err := json.Marshal(obj.Object); err != nil {
			t.Fatalf("valid pod does not encode: %v", err)
		}
	})
}
