package server

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
)

func TestLogOptions(t *testing.T) {
	now := time.Unix(1000, 0)
	q, _ := url.ParseQuery("follow=true&timestamps=1&tailLines=5&limitBytes=10&sinceSeconds=60&previous=true")
	o, prev, err := LogOptions(q, now)
	if err != nil || !o.Follow || !o.Timestamp || *o.TailLines != 5 || *o.LimitBytes != 10 || !o.Since.Equal(now.Add(-time.Minute)) || !prev {
		t.Errorf("%+v %v %v", o, prev, err)
	}
	q, _ = url.ParseQuery("sinceTime=2026-01-02T03:04:05Z")
	if o, _, err = LogOptions(q, now); err != nil || o.Since.Year() != 2026 {
		t.Errorf("sinceTime: %+v %v", o, err)
	}
	for _, bad := range []string{"tailLines=-1", "limitBytes=x", "sinceTime=yesterday"} {
		q, _ := url.ParseQuery(bad)
		if _, _, err := LogOptions(q, now); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestAttributes: the kubelet's mapping of a request to nodes subresources and a verb
// (pkg/kubelet/server/auth_test.go's cases with fine-grained authorization).
func TestAttributes(t *testing.T) {
	u := &user.DefaultInfo{Name: "metrics-server", Groups: []string{"system:serviceaccounts"}}
	for _, c := range []struct {
		method, path, verb string
		subresources       []string
	}{
		{"GET", "/containerLogs/a/b/c", "get", []string{"proxy"}},
		{"POST", "/exec/a/b/c", "create", []string{"proxy"}},
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/statsx", "get", []string{"proxy"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/logs/", "get", []string{"log"}},
		{"GET", "/logs/messages", "get", []string{"log"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/allocatedPods", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/services", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"POST", "/checkpoint/a/b/c", "create", []string{"checkpoint"}},
		{"PUT", "/volumes/pv1/archive", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/volumes/pv1", "delete", []string{"proxy"}},
		{"HEAD", "/stats/summary", "", []string{"stats"}},
		{"GET", "/debug/services", "get", []string{"proxy"}},
	} {
		attrs := Attributes("n1", u, c.method, c.path)
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.GetSubresource())
			if a.GetVerb() != c.verb || a.GetResource() != "nodes" || a.GetName() != "n1" || a.GetAPIVersion() != "v1" || a.GetAPIGroup() != "" ||
				!a.IsResourceRequest() || a.GetPath() != c.path || a.GetUser().GetName() != "metrics-server" {
				t.Errorf("%s %s: %+v", c.method, c.path, a)
			}
		}
		if !slices.Equal(subs, c.subresources) {
			t.Errorf("%s %s: subresources %v, want %v", c.method, c.path, subs, c.subresources)
		}
	}
}
