package watchcache

import (
	"context"
	"errors"
	"testing"
)

func TestSetIsLazy(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	s := NewSet(ctx, Options{Store: testStore})
	if len(s.Prefixes()) != 0 {
		t.Fatal("caches before first use")
	}
	res, prefix := testResource(t)
	create(t, key(res, "", "x"), newObj("", "x", nil))
	c := s.Get(prefix, nil)
	if s.Get(prefix, nil) != c || len(s.Prefixes()) != 1 {
		t.Fatal("second Get made another cache")
	}
	got, err := c.List(ctx, prefix, ListOptions{})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("list: %v %v", got, err)
	}
	w, err := c.Watch(ctx, prefix, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop(prefix)
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("watcher not closed by Stop")
	}
	if _, err := c.List(ctx, prefix, ListOptions{Revision: c.Revision() + 100}); !errors.Is(err, ErrStopped) {
		t.Fatalf("list on a stopped cache: %v", err)
	}
	if len(s.Prefixes()) != 0 || s.Get(prefix, nil) == c {
		t.Fatal("Stop did not forget the cache")
	}
}
