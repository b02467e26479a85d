package platform

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestValidateComponent(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec string
		// want: "" valid; else each of the substrings of the joined errors (field: detail).
		want []string
	}{
		{name: "minimal", spec: `image: busybox`},
		{name: "full", spec: `
image: busybox
replicas: 2
exposes: [{name: http, port: 8080}, {port: 9090}]
uses: [{kind: Database, name: orders, as: db}, {kind: Volume, name: files, mountPath: /data}]
env: [{name: DSN, value: "postgres://${resources.db.host}:${resources.db.port}/"}]
livenessProbe: {httpGet: {path: /, port: 8080}}
resources: {limits: {memory: 64Mi}}`},
		{name: "cronjob", spec: `{image: busybox, workload: CronJob, schedule: "*/5 * * * *"}`},
		{name: "autoscaling", spec: `{image: busybox, autoscaling: {minReplicas: 2, maxReplicas: 5}}`},
		{name: "duplicate port names", spec: `{image: busybox, exposes: [{name: http, port: 80}, {name: http, port: 81}]}`,
			want: []string{"spec.exposes[1].name: Duplicate value"}},
		{name: "duplicate generated names", spec: `{image: busybox, exposes: [{port: 80}, {name: p80, port: 81}]}`,
			want: []string{"spec.exposes[1].name: Duplicate value"}},
		{name: "duplicate ports", spec: `{image: busybox, exposes: [{name: a, port: 80}, {name: b, port: 80}]}`,
			want: []string{"spec.exposes[1].port: Duplicate value"}},
		{name: "bad port name", spec: `{image: busybox, exposes: [{name: HTTP_1, port: 80}]}`, want: []string{"spec.exposes[0].name: Invalid value"}},
		{name: "bad port", spec: `{image: busybox, exposes: [{port: 70000}]}`, want: []string{"spec.exposes[0].port"}},
		{name: "volume without mountPath", spec: `{image: busybox, uses: [{kind: Volume, name: files}]}`,
			want: []string{"spec.uses[0].mountPath: Required value"}},
		{name: "relative mountPath", spec: `{image: busybox, uses: [{kind: Volume, name: files, mountPath: data}]}`,
			want: []string{"spec.uses[0].mountPath: Invalid value"}},
		{name: "mountPath on a database", spec: `{image: busybox, uses: [{kind: Database, name: orders, mountPath: /x}]}`,
			want: []string{"spec.uses[0].mountPath: Invalid value", "only a Volume"}},
		{name: "unknown use kind", spec: `{image: busybox, uses: [{kind: Secret, name: s}]}`, want: []string{"spec.uses[0].kind: Unsupported value"}},
		{name: "use in another namespace", spec: `{image: busybox, uses: [{kind: Database, name: orders, namespace: other}]}`,
			want: []string{"spec.uses[0].namespace: Forbidden"}},
		{name: "duplicate use names", spec: `{image: busybox, uses: [{kind: Database, name: a, as: x}, {kind: Cache, name: x}]}`,
			want: []string{"spec.uses[1].as: Duplicate value"}},
		{name: "cronjob without schedule", spec: `{image: busybox, workload: CronJob}`, want: []string{"spec.schedule: Required value"}},
		{name: "bad schedule", spec: `{image: busybox, workload: CronJob, schedule: "every minute"}`, want: []string{"spec.schedule: Invalid value"}},
		{name: "upstream schedule check", spec: `{image: busybox, workload: CronJob, schedule: "61 * * * *"}`, want: []string{"spec.schedule"}},
		{name: "schedule on a deployment", spec: `{image: busybox, schedule: "* * * * *"}`, want: []string{"spec.schedule: Invalid value"}},
		{name: "unknown placeholder", spec: `{image: busybox, env: [{name: X, value: "${resources.db.host}"}]}`,
			want: []string{"spec.env[0].value: Invalid value", `no entry of spec.uses is named "db"`}},
		{name: "placeholder of a volume", spec: `{image: busybox, uses: [{kind: Volume, name: v, mountPath: /v}], env: [{name: X, value: "${resources.v.path}"}]}`,
			want: []string{"spec.env[0].value", "has no connection"}},
		{name: "malformed placeholder", spec: `{image: busybox, env: [{name: X, value: "${resources.db}"}]}`, want: []string{"malformed placeholder"}},
		{name: "autoscaling min > max", spec: `{image: busybox, autoscaling: {minReplicas: 5, maxReplicas: 2}}`,
			want: []string{"spec.autoscaling.minReplicas: Invalid value", "must not exceed maxReplicas"}},
		{name: "autoscaling a job", spec: `{image: busybox, workload: Job, autoscaling: {maxReplicas: 2}}`, want: []string{"spec.autoscaling: Forbidden"}},
		{name: "upstream: env name", spec: `{image: busybox, env: [{name: "", value: x}]}`, want: []string{"spec.env[0].name: Required value"}},
		{name: "upstream: probe without handler", spec: `{image: busybox, readinessProbe: {periodSeconds: 5}}`, want: []string{"spec.readinessProbe"}},
		{name: "upstream: requests above limits", spec: `{image: busybox, resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}}`,
			want: []string{"spec.resources.requests"}},
		{name: "upstream: env name with =", spec: `{image: busybox, env: [{name: "A=B", value: x}]}`, want: []string{"spec.env[0].name: Invalid value"}},
		{name: "upstream: negative probe period", spec: `{image: busybox, livenessProbe: {tcpSocket: {port: 80}, periodSeconds: -1}}`, want: []string{"spec.livenessProbe.periodSeconds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Component",
				"metadata": map[string]any{"name": "web", "namespace": "shop"}, "spec": spec}}
			errs := validateComponent(context.Background(), obj, nil)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			got := strings.Join(msgs, "\n")
			if len(tc.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("accepted; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors %q; want one containing %q", got, w)
				}
			}
		})
	}
}

// TestValidateComponentUpdate: an update that changes the spec is validated as a create
// is; one that leaves it as it was (the engine's finalizer, a label) is not validated
// again, so a Component admitted under older rules can still get its finalizer removed.
func TestValidateComponentUpdate(t *testing.T) {
	obj := func(spec string) *unstructured.Unstructured {
		var s map[string]any
		if err := yaml.Unmarshal([]byte(spec), &s); err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Component",
			"metadata": map[string]any{"name": "web", "namespace": "shop"}, "spec": s}}
	}
	bad := `{image: busybox, exposes: [{port: 70000}]}`
	if errs := validateComponent(context.Background(), obj(bad), obj(`{image: busybox}`)); len(errs) == 0 {
		t.Error("a spec changed to an invalid one was admitted")
	}
	withFinalizer := obj(bad)
	withFinalizer.SetFinalizers([]string{"kubeos.dev/lifecycle"})
	if errs := validateComponent(context.Background(), withFinalizer, obj(bad)); len(errs) != 0 {
		t.Errorf("an update leaving the spec as it was: %v", errs)
	}
}
