package filters

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// tokenTable is a token authenticator over a table that counts its lookups; a token
// "<name>@<aud>" is accepted only for audience aud, as a service-account token is.
type tokenTable struct {
	mu      sync.Mutex
	valid   map[string]bool
	lookups map[string]int
}

func (tt *tokenTable) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.lookups[token]++
	valid, known := tt.valid[token]
	switch {
	case !known:
		return nil, false, nil
	case !valid:
		return nil, false, errors.New("revoked")
	}
	name, aud, _ := strings.Cut(token, "@")
	if auds, _ := authenticator.AudiencesFrom(ctx); !auds.Has(aud) {
		return nil, false, errors.New("audience not accepted")
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name, Groups: []string{"g"}, Extra: map[string][]string{"k": {"v"}}},
		Audiences: authenticator.Audiences{aud}}, true, nil
}

func (tt *tokenTable) set(token string, valid bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.valid[token] = valid
}

func (tt *tokenTable) count(token string) int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.lookups[token]
}

// TestCachedTokens: a success is answered from the cache (one lookup) for the same token
// and audiences only; another token or other audiences are looked up and answer for
// themselves; failures and unknown tokens are looked up every time, so a token fixed after
// a refusal works at once; callers get copies of the cached user.
func TestCachedTokens(t *testing.T) {
	ctx := context.Background()
	const api = "https://kubernetes.default.svc"
	tt := &tokenTable{valid: map[string]bool{"alice@" + api: true, "bob@" + api: true, "carol@" + api: false, "dave@vault": true}, lookups: map[string]int{}}
	c := NewCachedTokens(tt, []string{api}, time.Hour)

	for range 3 {
		u, ok, err := c.AuthenticateToken(ctx, "alice@"+api)
		if err != nil || !ok || u.Name != "alice" {
			t.Fatalf("alice: %+v %v %v", u, ok, err)
		}
		u.Groups[0], u.Extra["k"][0] = "changed", "changed" // must not reach the cache
	}
	if n := tt.count("alice@" + api); n != 1 {
		t.Errorf("alice looked up %d times, want 1 (cached)", n)
	}
	u, auds, ok, err := c.Review(ctx, "alice@"+api, nil)
	if err != nil || !ok || !slices.Equal(u.Groups, []string{"g", "system:authenticated"}) || u.Extra["k"][0] != "v" || !slices.Equal(auds, []string{api}) {
		t.Errorf("alice's review: %+v %v %v %v", u, auds, ok, err)
	}
	if u, ok, _ := c.AuthenticateToken(ctx, "bob@"+api); !ok || u.Name != "bob" {
		t.Errorf("bob answered as %+v", u)
	}

	// Other audiences are another key: alice's token is looked up again and refused for them.
	if _, _, ok, err := c.Review(ctx, "alice@"+api, []string{"vault"}); ok || err == nil {
		t.Errorf("alice for vault: ok %v err %v, want refused", ok, err)
	}
	if n := tt.count("alice@" + api); n != 2 {
		t.Errorf("alice looked up %d times, want 2", n)
	}
	if _, auds, ok, _ := c.Review(ctx, "dave@vault", []string{"vault", "other"}); !ok || !slices.Equal(auds, []string{"vault"}) {
		t.Errorf("dave for vault: ok %v audiences %v", ok, auds)
	}
	if _, ok, err := c.AuthenticateToken(ctx, "dave@vault"); ok || err == nil {
		t.Errorf("dave's vault token on the request path: ok %v err %v, want refused", ok, err)
	}

	// Failures are not cached: carol's token works as soon as it becomes valid.
	for range 3 {
		if _, ok, err := c.AuthenticateToken(ctx, "carol@"+api); ok || err == nil {
			t.Fatalf("revoked carol: ok %v err %v", ok, err)
		}
	}
	tt.set("carol@"+api, true)
	if _, ok, err := c.AuthenticateToken(ctx, "carol@"+api); !ok || err != nil {
		t.Errorf("carol after the fix: ok %v err %v", ok, err)
	}
	if n := tt.count("carol@" + api); n != 4 {
		t.Errorf("carol looked up %d times, want 4 (no failure cached)", n)
	}
	for range 2 {
		if _, ok, err := c.AuthenticateToken(ctx, "nobody"); ok || err != nil {
			t.Fatalf("unknown token: ok %v err %v", ok, err)
		}
	}
	if n := tt.count("nobody"); n != 2 {
		t.Errorf("unknown token looked up %d times, want 2", n)
	}

	// TTL 0: no cache.
	nc := NewCachedTokens(tt, []string{api}, 0)
	for range 2 {
		if _, ok, _ := nc.AuthenticateToken(ctx, "bob@"+api); !ok {
			t.Fatal("bob without cache refused")
		}
	}
	if n := tt.count("bob@" + api); n != 3 {
		t.Errorf("bob looked up %d times, want 3 (1 cached + 2 uncached)", n)
	}
}

// TestUpstreamToken: a Kube token authenticator behind authenticator.Token keeps its
// answers: the user, unknown (not ok, no error), and errors.
func TestUpstreamToken(t *testing.T) {
	st, err := ParseTokens(strings.NewReader("s3cret,alice,uid-1,dev\n"), "tokens.csv")
	if err != nil {
		t.Fatal(err)
	}
	a := UpstreamToken(st)
	resp, ok, err := a.AuthenticateToken(context.Background(), "s3cret")
	if err != nil || !ok || resp.User.GetName() != "alice" || resp.User.GetUID() != "uid-1" || !slices.Equal(resp.User.GetGroups(), []string{"dev", "system:authenticated"}) {
		t.Fatalf("s3cret: %+v %v %v", resp, ok, err)
	}
	if resp, ok, err := a.AuthenticateToken(context.Background(), "nope"); resp != nil || ok || err != nil {
		t.Fatalf("unknown: %+v %v %v", resp, ok, err)
	}
}
