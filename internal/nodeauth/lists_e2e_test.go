package nodeauth_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/server/servertest"
)

// TestNodeListsItsOwn: a node lists and watches pods only with fieldSelector
// spec.nodeName=<itself>, and its Node by metadata.name, as the kubelet does.
func TestNodeListsItsOwn(t *testing.T) {
	ctx := context.Background()
	cs := admin(t)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	const ns = "node-lists"
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	for _, n := range []string{"l1", "l2"} {
		must(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}))
	}
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("q1", "l1", "x", ""), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	must(cs.CoreV1().Pods(ns).Create(ctx, pod("q2", "l2", "x", ""), metav1.CreateOptions{}))
	l1 := nodeClient(t, "l1")
	pods, err := l1.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=l1"})
	if err != nil {
		t.Fatalf("l1 lists its pods: %v", err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "q1" {
		t.Fatalf("l1's pods: %d items", len(pods.Items))
	}
	w, err := l1.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=l1"})
	if err != nil {
		t.Fatalf("l1 watches its pods: %v", err)
	}
	w.Stop()
	_, err = l1.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=l2"})
	forbidden(t, "l1 lists l2's pods", err, "can only list/watch pods with spec.nodeName field selector")
	_, err = l1.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	forbidden(t, "l1 lists all pods", err, "can only list/watch pods with spec.nodeName field selector")
	nodes, err := l1.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l1"})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("l1 lists its Node by name: %v", err)
	}
	_, err = l1.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l2"})
	forbidden(t, "l1 lists node l2 by name", err, "cannot read 'l2'")
}
