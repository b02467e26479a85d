package server

import (
	"net/url"
	"testing"
	"time"
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

func TestSubresourceAndVerb(t *testing.T) {
	for path, want := range map[string]string{"/containerLogs/a/b/c": "proxy", "/exec/a/b/c": "proxy", "/stats/summary": "stats", "/metrics": "metrics", "/metrics/cadvisor": "metrics", "/logs/": "log", "/pods": "proxy"} {
		if got := subresource(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	for m, want := range map[string]string{"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "HEAD": "get"} {
		if got := verb(m); got != want {
			t.Errorf("%s: %s, want %s", m, got, want)
		}
	}
}
