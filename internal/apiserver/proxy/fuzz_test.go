package proxy

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/apiserver/request"
)

// FuzzConnect sends arbitrary methods, paths, queries and upgrade headers to the handler,
// over objects that never lead to a network dial (pods without nodes or IPs, a node
// without addresses, a service without endpoints): every answer must be a 2xx-4xx or
// upstream's 503 for a service with nothing to reach, never a panic or another 5xx.
func FuzzConnect(f *testing.F) {
	for _, seed := range []struct{ method, path, query, upgrade string }{
		{"GET", "/api/v1/namespaces/d/pods/p/log", "tailLines=1&container=a", ""},
		{"GET", "/api/v1/namespaces/d/pods/two/log", "sinceTime=2026-01-01T00:00:00Z&sinceSeconds=1", ""},
		{"POST", "/api/v1/namespaces/d/pods/p/exec", "command=ls&stdin=1", "SPDY/3.1"},
		{"GET", "/api/v1/namespaces/d/pods/p/attach", "stdout=1", "websocket"},
		{"GET", "/api/v1/namespaces/d/pods/lost/portforward", "ports=80", "websocket"},
		{"GET", "/api/v1/namespaces/d/pods/p:80/proxy/x/", "", ""},
		{"PUT", "/api/v1/namespaces/d/services/https:s:443/proxy/", "", ""},
		{"GET", "/api/v1/nodes/n/proxy/healthz", "", ""},
		{"DELETE", "/api/v1/nodes/a:b:c/proxy", "dryRun=All", ""},
	} {
		f.Add(seed.method, seed.path, seed.query, seed.upgrade)
	}
	objs := &memObjects{
		pods: map[string]*corev1.Pod{
			"d/p":    {ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}},
			"d/two":  {ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: "d"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}},
			"d/lost": {ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: "d"}, Spec: corev1.PodSpec{NodeName: "ghost", Containers: []corev1.Container{{Name: "a"}}}},
		},
		nodes:    map[string]*corev1.Node{"n": {ObjectMeta: metav1.ObjectMeta{Name: "n"}}},
		services: map[string]*corev1.Service{"d/s": {ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "d"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}},
		slices:   []*discoveryv1.EndpointSlice{},
	}
	h, err := New(Options{Objects: objs, KubeletTLS: &tls.Config{}, Authorize: func(context.Context, *request.User, *request.Info) (bool, string) { return true, "" }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, query, upgrade string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path+query, " \r\n#") || method == "" || strings.ContainsAny(method, " \r\n/") {
			return
		}
		u := &url.URL{Path: path, RawQuery: query}
		r, err := http.NewRequest(method, u.String(), nil)
		if err != nil {
			return
		}
		if upgrade != "" {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", upgrade)
			r.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
		}
		ctx := request.WithInfo(r.Context(), request.Parse(r))
		ctx = request.WithUser(ctx, &request.User{Name: "u"})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r.WithContext(ctx))
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			// A node without an address is upstream's 500: not a client's doing.
			if strings.Contains(rec.Body.String(), "no preferred addresses found") {
				return
			}
			t.Fatalf("%s %s?%s (upgrade %q): %d %s", method, path, query, upgrade, rec.Code, rec.Body.String())
		}
	})
}
