package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"kubeos.dev/kube/internal/server/servertest"
)

// contentTypes records the Content-Type of every response, by method.
type contentTypes struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string][]string
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		c.seen[r.Method] = append(c.seen[r.Method], resp.Header.Get("Content-Type"))
		c.mu.Unlock()
	}
	return resp, err
}

// protobufClient is an admin clientset that sends and prefers protobuf, as
// kube-controller-manager's do, recording the Content-Type of every answer.
func protobufClient(t *testing.T) (*kubernetes.Clientset, *contentTypes) {
	t.Helper()
	cfg := adminConfig(t)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rec := &contentTypes{seen: map[string][]string{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, rec
}

// TestProtobufAnswers: a client-go clientset configured for protobuf, as kube-controller-manager
// and Kube's own controllers run, gets protobuf back from create and update as well as from get
// and list, and the objects it decodes are the ones it wrote.
func TestProtobufAnswers(t *testing.T) {
	apiSuite.Need(t)
	createNamespace(t, "proto")
	cs, rec := protobufClient(t)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("proto")
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-", Labels: map[string]string{"a": "b"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Name == "" || created.ResourceVersion == "" || created.Data["k"] != "v" || created.Labels["a"] != "b" {
		t.Fatalf("created: %+v", created)
	}
	created.Data["k"] = "w"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Data["k"] != "w" || updated.ResourceVersion == created.ResourceVersion {
		t.Fatalf("updated: %+v", updated)
	}
	got, err := cms.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil || got.Data["k"] != "w" {
		t.Fatalf("get: %v %+v", err, got)
	}
	// The answers of writes are encoded from the typed object validation decoded (not from
	// the stored content): they must be the stored object whole, as a JSON client reads it.
	jcs, err := kubernetes.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	sameAsStored := func(what string, answer, stored any) {
		t.Helper()
		if !apiequality.Semantic.DeepEqual(answer, stored) {
			t.Errorf("%s answered\n%+v\nbut JSON reads\n%+v", what, answer, stored)
		}
	}
	if j, err := jcs.CoreV1().ConfigMaps("proto").Get(ctx, updated.Name, metav1.GetOptions{}); err != nil || len(j.ManagedFields) == 0 || j.UID == "" {
		t.Fatalf("JSON get: %v %+v", err, j)
	} else {
		sameAsStored("configmap update", updated, j)
	}
	sec, err := cs.CoreV1().Secrets("proto").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := jcs.CoreV1().Secrets("proto").Get(ctx, "s", metav1.GetOptions{}); err != nil || string(j.Data["k"]) != "v" {
		t.Fatalf("JSON get: %v %+v", err, j)
	} else {
		sameAsStored("secret create", sec, j)
	}
	sa, err := cs.CoreV1().ServiceAccounts("proto").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa", Annotations: map[string]string{"x": "y"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa.Labels = map[string]string{"l": "m"}
	if sa, err = cs.CoreV1().ServiceAccounts("proto").Update(ctx, sa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if j, err := jcs.CoreV1().ServiceAccounts("proto").Get(ctx, "sa", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else {
		sameAsStored("serviceaccount update", sa, j)
	}
	// Status errors stay JSON metav1.Status, which client-go decodes either way.
	if _, err := cms.Create(ctx, created, metav1.CreateOptions{}); err == nil {
		t.Fatal("second create of the same name succeeded")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodGet} {
		if len(rec.seen[m]) == 0 || rec.seen[m][0] != "application/vnd.kubernetes.protobuf" {
			t.Errorf("%s answered %q, want protobuf", m, rec.seen[m])
		}
	}
}

// TestProtobufWatch: a protobuf clientset's watch is a protobuf stream (length-delimited
// WatchEvents, as kube-apiserver sends): modifications, deletions, bookmarks and an informer's
// streaming list all decode, and a watch from a compacted version ends with a 410 it decodes.
func TestProtobufWatch(t *testing.T) {
	apiSuite.Need(t)
	const ns = "proto-watch"
	createNamespace(t, ns)
	cs, rec := protobufClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cms := cs.CoreV1().ConfigMaps(ns)

	// An informer (client-go's defaults: a streaming list when the server offers it) syncs
	// the existing object and sees the new ones.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, ok, _ := inf.GetStore().GetByKey(ns + "/before"); !ok {
		t.Fatal("informer's initial list lacks the configmap created before it")
	}

	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "0", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() watch.Event {
		t.Helper()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed")
				}
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == "kube-root-ca.crt" {
					continue // published in every namespace, as upstream does
				}
				if ev.Type != watch.Bookmark {
					return ev
				}
				if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.ResourceVersion == "" {
					t.Fatalf("bookmark object %#v", ev.Object)
				}
			case <-ctx.Done():
				t.Fatal("no watch event")
			}
		}
	}
	if ev := next(); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "before" {
		t.Fatalf("first event %v %#v", ev.Type, ev.Object)
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "2"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "after", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ  watch.EventType
		data string
	}{{watch.Added, "1"}, {watch.Modified, "2"}, {watch.Deleted, "2"}} {
		ev := next()
		got, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != want.typ || !ok || got.Name != "after" || got.Data["k"] != want.data {
			t.Fatalf("event %v %#v, want %v of after with k=%s", ev.Type, ev.Object, want.typ, want.data)
		}
	}
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if _, ok, _ := inf.GetStore().GetByKey(ns + "/after"); ok {
			return fmt.Errorf("informer still has the deleted configmap")
		}
		return nil
	})

	// A watch from a version older than the watch cache's window and compacted away in etcd:
	// a 410 Expired, as an ERROR event in the stream. The cache keeps the resource's history
	// since the server started, up to --watch-cache-size (1000) events (this package fixes it there; by default it grows while the events are fresh): push the version
	// out of it first.
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "churn"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var churn sync.WaitGroup
	for w := range 8 {
		churn.Go(func() {
			for i := range 130 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%d-%d", w, i)}}
				if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	churn.Wait()
	store := srv.Inner().Store
	rev, err := store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	old, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch from a compacted version: %v", err)
		}
	} else {
		defer old.Stop()
		ev := <-old.ResultChan()
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || (st.Code != http.StatusGone) {
			t.Fatalf("watch from a compacted version: %v %#v", ev.Type, ev.Object)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	stream := false
	for _, ct := range rec.seen[http.MethodGet] {
		stream = stream || ct == "application/vnd.kubernetes.protobuf;stream=watch"
	}
	if !stream {
		t.Errorf("no protobuf watch stream among the GET answers %q", rec.seen[http.MethodGet])
	}
}

// TestProtobufMetadata: client-go's metadata client (the garbage collector's, and
// controller-runtime's for metadata-only watches) asks for PartialObjectMetadata in protobuf
// first; get, list and watch answer so, and what it decodes is the objects' metadata.
func TestProtobufMetadata(t *testing.T) {
	apiSuite.Need(t)
	cfg := adminConfig(t)
	rec := &contentTypes{seen: map[string][]string{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(adminConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cms := md.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("default")
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "meta-proto",
		Labels: map[string]string{"k": "v"}}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{FieldManager: "tester"}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "meta-proto", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["k"] != "v" || got.UID == "" || len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != "tester" {
		t.Fatalf("metadata from get: %+v", got.ObjectMeta)
	}
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "k=v"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "meta-proto" || list.ResourceVersion == "" {
		t.Fatalf("metadata list: %d items, rv %q", len(list.Items), list.ResourceVersion)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.name=meta-proto", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cs.CoreV1().ConfigMaps("default").Patch(ctx, "meta-proto", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"k2":"v2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "meta-proto", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for len(seen) < 2 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %v", seen)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			m, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("watch event %s carries %T", ev.Type, ev.Object)
			}
			if ev.Type == watch.Modified && m.Labels["k2"] != "v2" {
				t.Fatalf("MODIFIED event's labels: %v", m.Labels)
			}
			seen = append(seen, fmt.Sprintf("%s %s", ev.Type, m.Name))
		case <-ctx.Done():
			t.Fatalf("watch saw only %v", seen)
		}
	}
	if fmt.Sprint(seen) != "[MODIFIED meta-proto DELETED meta-proto]" {
		t.Fatalf("watch events: %v", seen)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ct := range rec.seen["GET"] {
		if ct != "application/vnd.kubernetes.protobuf" && ct != "application/vnd.kubernetes.protobuf;stream=watch" {
			t.Fatalf("a metadata GET was answered with %q, want protobuf (all: %v)", ct, rec.seen["GET"])
		}
	}
}

// TestProtobufPodWatchMatchesJSON: a pod written through protobuf (its answer encoded from the
// typed object validation made, and remembered for the watch events of that write) reaches a
// protobuf watch as exactly what a JSON watch of the same changes decodes — the create and a
// status update.
func TestProtobufPodWatchMatchesJSON(t *testing.T) {
	apiSuite.Need(t)
	const ns = "proto-pods"
	createNamespace(t, ns)
	cs, _ := protobufClient(t)
	jcs, err := kubernetes.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := jcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchFrom := func(c kubernetes.Interface) watch.Interface {
		w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	pw, jw := watchFrom(cs), watchFrom(jcs)
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler may write the pod's status first (no node takes it): the events compared
	// are whichever come, in the same order on both watches.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: "Example", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	next := func(w watch.Interface) watch.Event {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
		return watch.Event{}
	}
	for i, want := range []watch.EventType{watch.Added, watch.Modified} {
		p, j := next(pw), next(jw)
		if p.Type != want || j.Type != want {
			t.Fatalf("event %d: protobuf %s, JSON %s, want %s", i, p.Type, j.Type, want)
		}
		if !apiequality.Semantic.DeepEqual(p.Object, j.Object) {
			t.Errorf("event %d: the protobuf watch decoded\n%+v\nthe JSON watch\n%+v", i, p.Object, j.Object)
		}
	}
}
