package agent

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestGRPCProbe: a gRPC readiness probe asks the gRPC health service for the probe's
// service name and passes only while it answers SERVING. The health server is the test's:
// the pod runs in the host's network, so the probe to its address reaches it.
func TestGRPCProbe(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := ctxT(t, 3*time.Minute)
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	const service = "kube.test.Backend"
	hs.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)

	service2 := service
	p := busyboxPod("grpc", nodeName, "exec sleep 100000")
	p.Spec.HostNetwork = true
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(l.Addr().(*net.TCPAddr).Port), Service: &service2}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "grpc", 90*time.Second, "running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	// NOT_SERVING: unready, and the Unhealthy event says what the service answered.
	servertest.Eventually(t, 30*time.Second, 300*time.Millisecond, func() error {
		evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "NOT_SERVING") {
				return nil
			}
		}
		return fmt.Errorf("no Unhealthy event naming NOT_SERVING: %+v", evs.Items)
	})
	if got, err := cs.CoreV1().Pods(ns).Get(ctx, "grpc", metav1.GetOptions{}); err != nil || podReady(got) {
		t.Fatalf("pod Ready while its service is NOT_SERVING (%v)", err)
	}
	hs.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
	waitPod(t, cs, ns, "grpc", 30*time.Second, "Ready once SERVING", podReady)
	hs.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	waitPod(t, cs, ns, "grpc", 30*time.Second, "unready again once NOT_SERVING", func(p *corev1.Pod) bool { return !podReady(p) })
}
