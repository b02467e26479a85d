package scheduler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSmoke(t *testing.T) {
	cs := clientset(t)
	createNamespace(t, cs, "smoke")
	createNodes(t, cs, nodeSpec{name: "smoke-1", cpu: "4", memory: "8Gi"}, nodeSpec{name: "smoke-2", cpu: "1", memory: "1Gi"})
	if _, err := cs.CoreV1().Pods("smoke").Create(ctxT(t), withRequests(pausePod("smoke", "a"), "2", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := waitScheduled(t, cs, "smoke", "a"); got != "smoke-1" {
		t.Fatalf("node %s", got)
	}
	if _, err := cs.CoreV1().Pods("smoke").Create(ctxT(t), withRequests(pausePod("smoke", "big"), "20", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Log(waitUnschedulable(t, cs, "smoke", "big"))
}
