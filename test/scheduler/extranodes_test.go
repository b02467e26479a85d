package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// extraNodes adds nodes of the test's own beside the shared cluster, tainted
// <key>=only:NoSchedule so no other test's pod lands on them (the test's pods tolerate it
// through onlyOn), with their Leases renewed every 5 s while the test runs (so the node
// lifecycle controller keeps them Ready); the cleanup stops that and deletes nodes and
// Leases, so the shared cluster is 50 nodes again for the other tests' messages.
func extraNodes(t *testing.T, cs kubernetes.Interface, key string, specs []nodeSpec) {
	t.Helper()
	var names []string
	for _, s := range specs {
		s.taints = append(s.taints, corev1.Taint{Key: key, Value: "only", Effect: corev1.TaintEffectNoSchedule})
		if s.labels == nil {
			s.labels = map[string]string{}
		}
		s.labels[key] = "yes"
		createNode(t, cs, s)
		names = append(names, s.name)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	renew := func() {
		now := metav1.NewMicroTime(time.Now())
		leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		for _, n := range names {
			l, err := leases.Get(context.Background(), n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, _ = leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &n, LeaseDurationSeconds: ptrInt32(40), RenewTime: &now}}, metav1.CreateOptions{})
				continue
			}
			if err == nil {
				l.Spec.RenewTime = &now
				_, _ = leases.Update(context.Background(), l, metav1.UpdateOptions{})
			}
		}
	}
	renew()
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				renew()
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		for _, n := range names {
			_ = cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
}

// onlyOn makes p tolerate the extra nodes' taint and select them (or, with host, one of
// them by kubernetes.io/hostname).
func onlyOn(p *corev1.Pod, key, host string) *corev1.Pod {
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: "only", Effect: corev1.TaintEffectNoSchedule})
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector[key] = "yes"
	if host != "" {
		p.Spec.NodeSelector["kubernetes.io/hostname"] = host
	}
	return p
}

// deletePodNow finishes a pod's deletion as a kubelet would (no agent runs these pods).
func deletePodNow(cs kubernetes.Interface, ns, name string) error {
	err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
