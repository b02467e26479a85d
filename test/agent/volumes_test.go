package agent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEnvAndVolumes: env (value with $(VAR), configMapKeyRef, secretKeyRef, fieldRef,
// resourceFieldRef, envFrom), the service variables of default/kubernetes (client-go's
// in-cluster configuration reads them; $(VAR) expands them too), configMap, secret, emptyDir and the projected service-account
// token volume the ServiceAccount admission adds; a pod that exits 0 with restartPolicy
// Never ends Succeeded with reason Completed, and its output says what it saw.
func TestEnvAndVolumes(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 2*time.Minute)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"k": "from-configmap", "FROMENV": "envfrom"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"s": []byte("from-secret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The namespace's default ServiceAccount comes from its controller.
	waitSA(t, ns)
	// default/kubernetes comes from its controller after the server's start.
	var kubeSvc *corev1.Service
	for deadline := time.Now().Add(time.Minute); ; {
		var err error
		if kubeSvc, err = cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no default/kubernetes Service: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	p := busyboxPod("env", nodeName, `echo "cm=$(cat /cfg/k) sec=$(cat /sec/s) a=$A b=$B ip=$IP node=$NODE mem=$MEM from=$FROMENV"; `+
		`echo "kube=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT tcp=$KUBERNETES_PORT api=$API"; `+
		`echo data > /scratch/x && cat /scratch/x; test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-ok; `+
		`cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo`)
	p.Spec.AutomountServiceAccountToken = nil
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	c := &p.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	c.Env = []corev1.EnvVar{
		{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "k"}}},
		{Name: "B", Value: "$(A)+x"},
		{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT_HTTPS)"},
	}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}, {Name: "sec", MountPath: "/sec"}, {Name: "scratch", MountPath: "/scratch"}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, ns, "env", 90*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if tm := got.Status.ContainerStatuses[0].State.Terminated; tm == nil || tm.Reason != "Completed" {
		t.Errorf("terminated %+v, want Completed", got.Status.ContainerStatuses[0].State)
	}
	raw, err := cs.CoreV1().Pods(ns).GetLogs("env", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := string(raw)
	for _, want := range []string{"cm=from-configmap", "sec=from-secret", "a=from-configmap", "b=from-configmap+x", "ip=" + got.Status.PodIP + " ",
		"node=" + nodeName, "mem=64", "from=envfrom", "data", "token-ok", ns,
		"kube=" + kubeSvc.Spec.ClusterIP + ":443 ", "tcp=tcp://" + kubeSvc.Spec.ClusterIP + ":443 ", "api=https://" + kubeSvc.Spec.ClusterIP + ":443"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func waitSA(t *testing.T, ns string) {
	t.Helper()
	cs := clientset(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{}); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("no default ServiceAccount in %s: %v", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
