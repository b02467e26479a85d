package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// TestWatchWithoutResourceVersion: a watch with no resourceVersion starts with the current
// objects as ADDED events (upstream's "get state and start at most recent"), and those arrive
// at once, with no later change needed to push them out.
func TestWatchWithoutResourceVersion(t *testing.T) {
	apiSuite.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("watch-norv-%d", time.Now().UnixNano())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	want := map[string]bool{"a": true, "b": true, "c": true}
	for name := range want {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, bookmarks := range []bool{false, true} {
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: bookmarks})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		timeout := time.After(30 * time.Second) // a deadline, not a measurement: nothing else writes
		for len(seen) < len(want) {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("bookmarks=%v: watch closed after %v", bookmarks, seen)
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if isCM && cm.Name == "kube-root-ca.crt" {
					continue // published in every namespace, whenever its controller gets to it
				}
				if ev.Type != watch.Added || !isCM || !want[cm.Name] {
					t.Fatalf("bookmarks=%v: got %s %T", bookmarks, ev.Type, ev.Object)
				}
				seen[cm.Name] = true
			case <-timeout:
				t.Fatalf("bookmarks=%v: only %v of the existing objects arrived without a further change", bookmarks, seen)
			}
		}
		w.Stop()
	}
}
