package agent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestShutdownGroups(t *testing.T) {
	p := func(name string, prio int32, grace int64, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   corev1.PodSpec{Priority: ptr.To(prio), TerminationGracePeriodSeconds: ptr.To(grace)},
			Status: corev1.PodStatus{Phase: phase}}
	}
	pods := []*corev1.Pod{
		p("critical", 2000001000, 30, corev1.PodRunning),
		p("high", 1000, 5, corev1.PodRunning),
		p("done", 0, 30, corev1.PodSucceeded),
		p("low", -5, 60, corev1.PodRunning),
		p("cluster-critical", 2000000000, 2, corev1.PodRunning),
	}
	var got []string
	for _, g := range shutdownGroups(pods, 30*time.Second, 10*time.Second) {
		var names []string
		for _, pod := range g.pods {
			names = append(names, pod.Name+"/"+time.Duration(shutdownGrace(pod, g.period)*int64(time.Second)).String())
		}
		got = append(got, g.period.String()+":"+strings.Join(names, ","))
	}
	// Regular pods first, lowest priority first, within 20 s (a pod's own grace when
	// shorter); critical pods last within 10 s.
	want := "20s:low/20s,high/5s 10s:cluster-critical/2s,critical/10s"
	if strings.Join(got, " ") != want {
		t.Errorf("shutdownGroups = %s, want %s", strings.Join(got, " "), want)
	}
	if g := shutdownGroups(pods[:1], 30*time.Second, 0); len(g) != 1 || g[0].period != 0 {
		t.Errorf("critical pods with no critical period: %+v", g)
	}
	if g := shutdownGrace(pods[0], 0); g != 1 {
		t.Errorf("grace within an empty period: %d, want the minimum 1", g)
	}
}
