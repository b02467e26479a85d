package platform

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func TestResolveRevisionEnv(t *testing.T) {
	secret := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "orders-connection"}, Key: key}}}
	}
	defined := []corev1.EnvVar{secret("ORDERS_URL", "url"), secret("ORDERS_PASSWORD", "password"), {Name: "MODE", Value: "v1"}}
	for _, tc := range []struct {
		name    string
		env     []corev1.EnvVar
		want    []corev1.EnvVar
		wantErr string
	}{
		{name: "none", env: nil, want: nil},
		{name: "plain values unchanged", env: []corev1.EnvVar{{Name: "MODE", Value: "v2"}}, want: []corev1.EnvVar{{Name: "MODE", Value: "v2"}}},
		{name: "placeholders become references to the injected variables",
			env:  []corev1.EnvVar{{Name: "DSN", Value: "${resources.orders.url}?password=${resources.orders.password}"}},
			want: []corev1.EnvVar{{Name: "DSN", Value: "$(ORDERS_URL)?password=$(ORDERS_PASSWORD)"}}},
		{name: "a use the Component does not have", env: []corev1.EnvVar{{Name: "X", Value: "${resources.cache.url}"}},
			wantErr: "the Component injects no CACHE_URL"},
		{name: "a key its connection does not have", env: []corev1.EnvVar{{Name: "X", Value: "${resources.orders.host}"}},
			wantErr: "the Component injects no ORDERS_HOST"},
		{name: "malformed", env: []corev1.EnvVar{{Name: "X", Value: "${resources.orders}"}}, wantErr: "malformed placeholder"},
		{name: "valueFrom kept", env: []corev1.EnvVar{secret("TOKEN", "token")}, want: []corev1.EnvVar{secret("TOKEN", "token")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveRevisionEnv(tc.env, defined)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case !equality.Semantic.DeepEqual(got, tc.want):
				t.Fatalf("env %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCanaryEnv: the canary's container gets the revision's placeholders as $(VAR)
// references after the injected variables, as the Component's pods would once promoted.
func TestCanaryEnv(t *testing.T) {
	comp := &v1alpha1.Component{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	comp.Spec.Image = "web:1"
	comp.Spec.Env = []corev1.EnvVar{{Name: "DSN", Value: "${resources.orders.url}"}}
	injected := corev1.EnvVar{Name: "ORDERS_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "orders-connection"}, Key: "url"}}}
	stable := &appsv1.Deployment{}
	stable.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "web:1",
		Env: []corev1.EnvVar{injected, {Name: "DSN", Value: "$(ORDERS_URL)"}}}}
	target := mergeRevision(revisionSpec{Image: comp.Spec.Image, Env: comp.Spec.Env}, "web:2",
		[]corev1.EnvVar{{Name: "DSN", Value: "${resources.orders.url}?sslmode=disable"}, {Name: "EXTRA", Value: "x-${resources.orders.url}"}})
	d := canaryDeployment(nil, comp, stable, target, 1, time.Minute)
	want := []corev1.EnvVar{injected, {Name: "DSN", Value: "$(ORDERS_URL)?sslmode=disable"}, {Name: "EXTRA", Value: "x-$(ORDERS_URL)"}}
	if got := d.Spec.Template.Spec.Containers[0].Env; !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("canary env %+v, want %+v", got, want)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "web:2" {
		t.Fatalf("canary image %s", img)
	}
}
