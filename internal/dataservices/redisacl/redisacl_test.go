package redisacl

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"kubeos.dev/kube/internal/dataservices/servers/testservers"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{"ns.name:": "ns.name:", "a*b?": `a\*b\?`, `x[y]\`: `x\[y\]\\`} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfinedUser(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	s, err := Open(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u := User{Name: "ns.orders", Password: "pw1", Prefix: "ns.orders:"}
	for i := range 2 {
		created, err := s.Ensure(ctx, u)
		if err != nil || created != (i == 0) {
			t.Fatalf("ensure %d: created %v, %v", i, created, err)
		}
	}
	if st, err := s.Observe(ctx, u); err != nil || !st.UpToDate {
		t.Fatalf("observe: %+v %v", st, err)
	}
	as := func(name, pw string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: r.Addr, Username: name, Password: pw, MaxRetries: -1})
	}
	c := as(u.Name, u.Password)
	defer c.Close()
	if err := c.Set(ctx, "ns.orders:a", "1", 0).Err(); err != nil {
		t.Fatalf("SET under prefix: %v", err)
	}
	if v, err := c.Get(ctx, "ns.orders:a").Result(); err != nil || v != "1" {
		t.Fatalf("GET under prefix: %q %v", v, err)
	}
	admin := redis.NewClient(&redis.Options{Addr: r.Addr, Password: testservers.RedisAdminPassword})
	defer admin.Close()
	admin.Set(ctx, "other:secret", "x", 0)
	for name, err := range map[string]error{
		"GET outside":   c.Get(ctx, "other:secret").Err(),
		"SET outside":   c.Set(ctx, "other:x", "1", 0).Err(),
		"KEYS":          c.Keys(ctx, "*").Err(),
		"SCAN":          c.Scan(ctx, 0, "*", 10).Err(),
		"FLUSHALL":      c.FlushAll(ctx).Err(),
		"FLUSHDB":       c.FlushDB(ctx).Err(),
		"RANDOMKEY":     c.RandomKey(ctx).Err(),
		"SELECT":        c.Do(ctx, "SELECT", "1").Err(),
		"CONFIG":        c.ConfigGet(ctx, "*").Err(),
		"PUBLISH other": c.Publish(ctx, "other:ch", "x").Err(),
	} {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s: %v, want NOPERM", name, err)
		}
	}
	if err := c.Publish(ctx, "ns.orders:ch", "x").Err(); err != nil {
		t.Errorf("PUBLISH under prefix: %v", err)
	}
	// Password change: the old one stops working.
	u.Password = "pw2"
	if st, _ := s.Observe(ctx, u); st.UpToDate {
		t.Fatal("observe missed a password change")
	}
	if _, err := s.Ensure(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := as(u.Name, "pw1").Ping(ctx).Err(); err == nil {
		t.Fatal("old password accepted")
	}
	c2 := as(u.Name, "pw2")
	defer c2.Close()
	if err := c2.Get(ctx, "ns.orders:a").Err(); err != nil {
		t.Fatalf("new password: %v", err)
	}
	// Retain: disabled, keys kept.
	if err := s.Disable(ctx, u.Name); err != nil {
		t.Fatal(err)
	}
	if err := as(u.Name, "pw2").Ping(ctx).Err(); err == nil {
		t.Fatal("disabled user logs in")
	}
	if n, _ := admin.Exists(ctx, "ns.orders:a").Result(); n != 1 {
		t.Fatal("retained keys gone")
	}
	// Delete: user and keys gone, other keys kept.
	for i := range 1200 {
		admin.Set(ctx, fmt.Sprintf("ns.orders:k%d", i), "v", 0)
	}
	if err := s.Delete(ctx, u.Name, u.Prefix); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Observe(ctx, u); st.Exists {
		t.Fatal("user still exists")
	}
	if keys, _ := admin.Keys(ctx, "ns.orders:*").Result(); len(keys) != 0 {
		t.Fatalf("%d keys left under the prefix", len(keys))
	}
	if n, _ := admin.Exists(ctx, "other:secret").Result(); n != 1 {
		t.Fatal("a key outside the prefix was removed")
	}
}
