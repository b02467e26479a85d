package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisKey is one line of a Redis archive: the key without its prefix, DUMP's payload and
// the remaining TTL in milliseconds (0: none).
type redisKey struct {
	Key   string `json:"k"`
	Dump  []byte `json:"d"`
	TTLms int64  `json:"t,omitempty"`
}

// globEscape escapes a prefix for SCAN MATCH.
func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// DumpRedis writes every key under prefix (DUMP and PTTL) to w; it returns how many.
func DumpRedis(ctx context.Context, adminURL, prefix string, w io.Writer) (int, error) {
	opt, err := redis.ParseURL(adminURL)
	if err != nil {
		return 0, fmt.Errorf("redis URL: %w", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	jw, err := newJSONLWriter(w, Header{Kind: "redis", Version: 1, Prefix: prefix})
	if err != nil {
		return 0, err
	}
	n := 0
	it := c.Scan(ctx, 0, globEscape(prefix)+"*", 500).Iterator()
	for it.Next(ctx) {
		key := it.Val()
		dump, err := c.Dump(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue // expired or deleted since SCAN saw it
		}
		if err != nil {
			return n, fmt.Errorf("redis DUMP %s: %w", key, err)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			return n, fmt.Errorf("redis PTTL %s: %w", key, err)
		}
		rk := redisKey{Key: strings.TrimPrefix(key, prefix), Dump: []byte(dump)}
		if ttl > 0 {
			rk.TTLms = ttl.Milliseconds()
		}
		if err := jw.Write(rk); err != nil {
			return n, err
		}
		n++
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("redis SCAN: %w", err)
	}
	return n, jw.Close()
}

// RestoreRedis RESTOREs an archive's keys (REPLACE, with their TTLs) under prefix, or under
// the prefix they were dumped from if prefix is empty; it returns how many.
func RestoreRedis(ctx context.Context, adminURL, prefix string, r io.Reader) (int, error) {
	opt, err := redis.ParseURL(adminURL)
	if err != nil {
		return 0, fmt.Errorf("redis URL: %w", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	jr, h, err := newJSONLReader(r, "redis")
	if err != nil {
		return 0, err
	}
	if prefix == "" {
		prefix = h.Prefix
	}
	n := 0
	for {
		var rk redisKey
		err := jr.Next(&rk)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("archive: %w", err)
		}
		ttl := time.Duration(rk.TTLms) * time.Millisecond
		if err := c.RestoreReplace(ctx, prefix+rk.Key, ttl, string(rk.Dump)).Err(); err != nil {
			return n, fmt.Errorf("redis RESTORE %s: %w", prefix+rk.Key, err)
		}
		n++
	}
}
