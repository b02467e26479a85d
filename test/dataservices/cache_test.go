package dataservices

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func cache(ns, name, extra string) string {
	return fmt.Sprintf("apiVersion: kubeos.dev/v1alpha1\nkind: Cache\nmetadata: {name: %s, namespace: %s}\nspec: {%s}\n", name, ns, extra)
}

func redisAdmin() *redis.Client {
	opt, _ := redis.ParseURL(rd.URL)
	return redis.NewClient(opt)
}

func redisAs(conn map[string]string) *redis.Client {
	opt, err := redis.ParseURL(conn["uri"])
	if err != nil {
		panic(err)
	}
	opt.MaxRetries = -1
	return redis.NewClient(opt)
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	apply(t, aliceKubeconfig, cache(acmeNS, "sessions", ""))
	apply(t, bobKubeconfig, cache(globexNS, "sessions", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}/{.status.keyPrefix}", "Active/acme-dev.sessions:", "cache", "sessions", "-n", acmeNS)
	waitFor(t, bobKubeconfig, 60*time.Second, "{.status.phase}", "Active", "cache", "sessions", "-n", globexNS)
	conn := secretData(t, acmeNS, "sessions-cache")
	other := secretData(t, globexNS, "sessions-cache")
	c := redisAs(conn)
	defer c.Close()

	t.Run("SET and GET under the prefix", func(t *testing.T) {
		if conn["keyPrefix"] != "acme-dev.sessions:" || conn["username"] != "acme-dev.sessions" {
			t.Fatalf("connection secret: prefix %q user %q", conn["keyPrefix"], conn["username"])
		}
		if err := c.Set(ctx, "acme-dev.sessions:u1", "alice", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Get(ctx, "acme-dev.sessions:u1").Result(); err != nil || v != "alice" {
			t.Fatalf("GET: %q %v", v, err)
		}
	})

	t.Run("refused outside the prefix and for KEYS and FLUSHALL", func(t *testing.T) {
		o := redisAs(other)
		defer o.Close()
		if err := o.Set(ctx, "globex-dev.sessions:secret", "bob", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"GET of another tenant's key": c.Get(ctx, "globex-dev.sessions:secret").Err(),
			"SET outside the prefix":      c.Set(ctx, "x", "1", 0).Err(),
			"KEYS":                        c.Keys(ctx, "*").Err(),
			"FLUSHALL":                    c.FlushAll(ctx).Err(),
			"SCAN":                        c.Scan(ctx, 0, "", 10).Err(),
			"other tenant GET":            o.Get(ctx, "acme-dev.sessions:u1").Err(),
		} {
			if err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("%s: %v, want NOPERM", name, err)
			}
		}
	})

	t.Run("a removed ACL user is re-created", func(t *testing.T) {
		a := redisAdmin()
		defer a.Close()
		if err := a.Do(ctx, "ACL", "DELUSER", "acme-dev.sessions").Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			fresh := redisAs(conn)
			defer fresh.Close()
			return fresh.Get(ctx, "acme-dev.sessions:u1").Err()
		})
		eventually(t, 10*time.Second, func() error {
			out, _, _ := kubectl(t, aliceKubeconfig, "", "get", "events", "-n", acmeNS, "--field-selector", "involvedObject.name=sessions", "-o", "jsonpath={.items[*].reason}")
			if !strings.Contains(out, "Recreated") {
				return fmt.Errorf("events: %q", out)
			}
			return nil
		})
	})
}

func TestCacheDeletionPolicy(t *testing.T) {
	ctx := context.Background()
	apply(t, aliceKubeconfig, cache(acmeNS, "kept", ""))
	apply(t, aliceKubeconfig, cache(acmeNS, "gone", "deletionPolicy: Delete"))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "cache", "kept", "-n", acmeNS)
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "cache", "gone", "-n", acmeNS)
	for _, name := range []string{"kept", "gone"} {
		c := redisAs(secretData(t, acmeNS, name+"-cache"))
		for i := range 50 {
			if err := c.Set(ctx, fmt.Sprintf("acme-dev.%s:k%d", name, i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	keptConn := secretData(t, acmeNS, "kept-cache")
	for _, name := range []string{"kept", "gone"} {
		if _, errOut, err := kubectl(t, aliceKubeconfig, "", "delete", "cache", name, "-n", acmeNS, "--timeout=60s"); err != nil {
			t.Fatalf("delete %s: %v %s", name, err, errOut)
		}
	}
	a := redisAdmin()
	defer a.Close()
	if keys, _ := a.Keys(ctx, "acme-dev.kept:*").Result(); len(keys) != 50 {
		t.Fatalf("Retain: %d keys left, want 50", len(keys))
	}
	if keys, _ := a.Keys(ctx, "acme-dev.gone:*").Result(); len(keys) != 0 {
		t.Fatalf("Delete: %d keys left", len(keys))
	}
	c := redisAs(keptConn)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("Retain: the user still logs in")
	}
	if users, _ := a.Do(ctx, "ACL", "USERS").StringSlice(); strings.Contains(strings.Join(users, ","), "acme-dev.gone") {
		t.Fatalf("Delete: user still exists: %v", users)
	}
}

func TestCacheBadInput(t *testing.T) {
	refused(t, aliceKubeconfig, cache(acmeNS, "steal", "keyPrefix: 'globex-dev.sessions:'"), "spec.keyPrefix", "must begin with the namespace")
	refused(t, aliceKubeconfig, cache(acmeNS, "nested", "keyPrefix: 'acme-dev.a:b:'"), "spec.keyPrefix")
	refused(t, aliceKubeconfig, cache(acmeNS, "noserver", "server: nope"), "spec.server")
}
