package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
)

func ptr[T any](v T) *T { return &v }

// template is a pod template of one container named app.
func template(lbl map[string]string, ann map[string]string, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: image,
			Ports: []corev1.ContainerPort{{Name: "web-port", ContainerPort: 8080}},
		}}},
	}
}

func deployment(name string, replicas int32, image string) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: template(lbl, nil, image),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(0)),
			}},
		},
	}
}

// deploymentDone is kubectl rollout status's "successfully rolled out" for generation gen
// (or the current one, gen 0), with every old pod gone.
func (e *env) deploymentDone(ctx context.Context, name string, gen int64) error {
	return e.until(ctx, 3*time.Minute, "Deployment "+name+" rolled out", func(ctx context.Context) (bool, error) {
		d, err := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if gen == 0 {
			gen = d.Generation
		}
		want := *d.Spec.Replicas
		st := d.Status
		if st.ObservedGeneration < gen || st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want || st.ReadyReplicas != want || ptrVal(st.TerminatingReplicas) != 0 {
			return false, nil
		}
		ok := false
		for _, c := range st.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "NewReplicaSetAvailable" {
				ok = true
			}
		}
		if !ok {
			return false, nil
		}
		return e.podsSettled(ctx, labels.SelectorFromSet(d.Spec.Selector.MatchLabels), int(want))
	})
}

// podsSettled: exactly n pods match sel, none being deleted, all Ready.
func (e *env) podsSettled(ctx context.Context, sel labels.Selector, n int) (bool, error) {
	pl, err := e.s.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, nil
	}
	if len(pl.Items) != n {
		return false, nil
	}
	for i := range pl.Items {
		if pl.Items[i].DeletionTimestamp != nil || !podReady(&pl.Items[i]) {
			return false, nil
		}
	}
	return true, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// updateDeployment changes a Deployment (retrying on conflict) and returns its new generation.
func (e *env) updateDeployment(ctx context.Context, name string, f func(*appsv1.Deployment)) (int64, error) {
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.s.cs.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(d)
		d, err = e.s.cs.AppsV1().Deployments(e.ns).Update(ctx, d, metav1.UpdateOptions{})
		if err == nil {
			gen = d.Generation
		}
		return err
	})
	return gen, err
}

// kubectl runs kubectl (the peer's build when present, else the one on $PATH) on the side.
func (e *env) kubectl(ctx context.Context, peerBin string, args ...string) (string, error) {
	bin := filepath.Join(peerBin, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		bin = "kubectl"
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", e.s.kubeconfig, "-n", e.ns}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
