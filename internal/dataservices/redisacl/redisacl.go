package redisacl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Denied are the commands a prefix-confined user may not run (they ignore key patterns or
// switch databases).
var Denied = []string{"keys", "scan", "randomkey", "flushall", "flushdb", "swapdb", "select", "move", "migrate"}

// User is one confined user.
type User struct {
	Name, Password string
	// Prefix of its keys and channels (no glob characters).
	Prefix string
}

// Rules are the ACL SETUSER rules for u (after reset).
func Rules(u User) []string {
	r := []string{"reset", "on", ">" + u.Password, "~" + escape(u.Prefix) + "*", "&" + escape(u.Prefix) + "*",
		"+@all", "-@admin", "-@dangerous"}
	for _, c := range Denied {
		r = append(r, "-"+c)
	}
	return r
}

// escape quotes glob characters of a prefix.
func escape(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// State is what Observe finds.
type State struct {
	Exists, Enabled bool
	// UpToDate: password, keys and channels are as Ensure writes them.
	UpToDate bool
}

// Server is an admin client to one Redis.
type Server struct{ c *redis.Client }

// Open makes a client for the admin URL (redis://user:pw@host:port).
func Open(adminURL string) (*Server, error) {
	opt, err := redis.ParseURL(adminURL)
	if err != nil {
		return nil, errors.New("redis: the server's admin url does not parse") // it has the password
	}
	opt.MaxRetries = 1
	return &Server{c: redis.NewClient(opt)}, nil
}

// Close closes the client.
func (s *Server) Close() error { return s.c.Close() }

func hash(pw string) string { h := sha256.Sum256([]byte(pw)); return hex.EncodeToString(h[:]) }

// Observe reads u's ACL.
func (s *Server) Observe(ctx context.Context, u User) (State, error) {
	res, err := s.c.Do(ctx, "ACL", "GETUSER", u.Name).Result()
	if errors.Is(err, redis.Nil) || (err == nil && res == nil) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("redis: acl getuser %s: %w", u.Name, err)
	}
	m := toMap(res)
	st := State{Exists: true}
	flags := toStrings(m["flags"])
	st.Enabled = slices.Contains(flags, "on")
	pws := toStrings(m["passwords"])
	keys, _ := m["keys"].(string)
	chans, _ := m["channels"].(string)
	st.UpToDate = st.Enabled && len(pws) == 1 && pws[0] == hash(u.Password) &&
		keys == "~"+escape(u.Prefix)+"*" && chans == "&"+escape(u.Prefix)+"*"
	return st, nil
}

// toMap reads ACL GETUSER's reply (a map in RESP3, a flat list in RESP2).
func toMap(v any) map[string]any {
	out := map[string]any{}
	switch v := v.(type) {
	case map[any]any:
		for k, x := range v {
			out[fmt.Sprint(k)] = x
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			out[fmt.Sprint(v[i])] = v[i+1]
		}
	}
	return out
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// Ensure writes u's ACL (creating the user if needed); created says it did not exist.
func (s *Server) Ensure(ctx context.Context, u User) (created bool, err error) {
	st, err := s.Observe(ctx, u)
	if err != nil {
		return false, err
	}
	args := []any{"ACL", "SETUSER", u.Name}
	for _, r := range Rules(u) {
		args = append(args, r)
	}
	if err := s.c.Do(ctx, args...).Err(); err != nil {
		return false, fmt.Errorf("redis: acl setuser %s: %s", u.Name, redact(err, u.Password))
	}
	return !st.Exists, nil
}

func redact(err error, secret string) string {
	if secret == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), secret, "<redacted>")
}

// Disable is Retain's teardown: the user is switched off and its connections end; its keys
// stay.
func (s *Server) Disable(ctx context.Context, name string) error {
	st, err := s.Observe(ctx, User{Name: name})
	if err != nil || !st.Exists {
		return err
	}
	if err := s.c.Do(ctx, "ACL", "SETUSER", name, "off", "resetpass").Err(); err != nil {
		return fmt.Errorf("redis: disable %s: %w", name, err)
	}
	if err := s.c.Do(ctx, "CLIENT", "KILL", "USER", name).Err(); err != nil && !strings.Contains(err.Error(), "No such") {
		return fmt.Errorf("redis: end connections of %s: %w", name, err)
	}
	return nil
}

// Delete is Delete's teardown: the user goes (its connections with it) and every key under
// prefix is unlinked.
func (s *Server) Delete(ctx context.Context, name, prefix string) error {
	if err := s.c.Do(ctx, "ACL", "DELUSER", name).Err(); err != nil {
		return fmt.Errorf("redis: acl deluser %s: %w", name, err)
	}
	var cursor uint64
	for {
		keys, next, err := s.c.Scan(ctx, cursor, escape(prefix)+"*", 500).Result()
		if err != nil {
			return fmt.Errorf("redis: scan %s*: %w", prefix, err)
		}
		if len(keys) > 0 {
			if err := s.c.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("redis: unlink under %s: %w", prefix, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// Ping checks the server answers.
func (s *Server) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Clients keeps one Server per key (a server entry), reopened when its version changes.
type Clients struct {
	mu sync.Mutex
	m  map[string]client
}

type client struct {
	version string
	s       *Server
}

// Get returns the Server for key at version.
func (c *Clients) Get(key, version, adminURL string) (*Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]client{}
	}
	if e, ok := c.m[key]; ok {
		if e.version == version {
			return e.s, nil
		}
		_ = e.s.Close()
		delete(c.m, key)
	}
	s, err := Open(adminURL)
	if err != nil {
		return nil, err
	}
	c.m[key] = client{version: version, s: s}
	return s, nil
}
