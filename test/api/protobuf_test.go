package api

import (
	"context"
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// TestProtobufAnswers: a client-go clientset configured for protobuf, as kube-controller-manager
// and Kube's own controllers run, gets protobuf back from create and update as well as from get
// and list, and the objects it decodes are the ones it wrote.
func TestProtobufAnswers(t *testing.T) {
	createNamespace(t, "proto")
	cfg := adminConfig(t)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rec := &contentTypes{seen: map[string][]string{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
