package filters

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"kubeos.dev/kube/internal/apiserver/request"
)

// ErrInvalidCredentials is wrapped by authenticators' errors for credentials that were
// presented and are not valid (expired, foreign, unknown).
var ErrInvalidCredentials = errors.New("invalid credentials")

// X509 authenticates TLS client certificates: CN is the user name, O the groups. The TLS
// layer only requests certificates (tls.RequestClientCert); X509 verifies them against
// Roots, so that an expired certificate or one of another CA reaches the handler and is
// answered 401, as kube-apiserver answers it, rather than failing the handshake.
type X509 struct {
	// Roots verify client certificates. nil trusts the chains the TLS layer verified
	// (tls.VerifyClientCertIfGiven).
	Roots *x509.CertPool
	// Now is the clock for expiry; nil means time.Now.
	Now func() time.Time
	// Cache, when set, remembers successful verifications (by certificate) for a minute, so
	// that the chain is not verified again on every request of a connection.
	Cache *VerifyCache
}

// VerifyCache remembers verified certificates. Safe for concurrent use; bounded.
type VerifyCache struct {
	mu sync.Mutex
	m  map[[32]byte]time.Time // certificate hash → verified until
}

const verifyCacheTTL, verifyCacheMax = time.Minute, 4096

func (c *VerifyCache) ok(key [32]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.m[key]
	return ok && now.Before(until)
}

func (c *VerifyCache) put(key [32]byte, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= verifyCacheMax {
		c.m = make(map[[32]byte]time.Time)
	}
	c.m[key] = until
}

// Authenticate implements Authenticator.
func (a X509) Authenticate(r *http.Request) (*request.User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	cert := r.TLS.PeerCertificates[0]
	if a.Roots == nil {
		if len(r.TLS.VerifiedChains) == 0 {
			return nil, false, nil
		}
	} else {
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		now := time.Now
		if a.Now != nil {
			now = a.Now
		}
		t := now()
		var key [32]byte
		if a.Cache != nil {
			key = sha256.Sum256(cert.Raw)
		}
		if a.Cache == nil || !a.Cache.ok(key, t) {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: a.Roots, Intermediates: inter, CurrentTime: t,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				return nil, false, fmt.Errorf("%w: client certificate %q: %v", ErrInvalidCredentials, cert.Subject.CommonName, err)
			}
			if a.Cache != nil {
				until := t.Add(verifyCacheTTL)
				if cert.NotAfter.Before(until) {
					until = cert.NotAfter
				}
				a.Cache.put(key, until)
			}
		}
	}
	if cert.Subject.CommonName == "" {
		return nil, false, fmt.Errorf("%w: client certificate has no common name", ErrInvalidCredentials)
	}
	return &request.User{Name: cert.Subject.CommonName, Groups: withAuthenticated(cert.Subject.Organization)}, true, nil
}

// withAuthenticated returns groups plus system:authenticated (once).
func withAuthenticated(groups []string) []string {
	if slices.Contains(groups, "system:authenticated") {
		return slices.Clone(groups)
	}
	return append(slices.Clone(groups), "system:authenticated")
}

// TokenAuthenticator authenticates a bearer token; ok is false when the token is not one it
// knows (other token authenticators may), err when it is one of its tokens and invalid.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (u *request.User, ok bool, err error)
}

// BearerToken authenticates "Authorization: Bearer <token>" with the first of Tokens that
// knows the token.
type BearerToken struct {
	Tokens []TokenAuthenticator
}

// Authenticate implements Authenticator.
func (b BearerToken) Authenticate(r *http.Request) (*request.User, bool, error) {
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return nil, false, nil
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, false, nil
	}
	return AuthenticateToken(r.Context(), b.Tokens, token)
}

// AuthenticateToken tries every authenticator in turn (TokenReview uses it too). A token no
// authenticator knows is an error.
func AuthenticateToken(ctx context.Context, authns []TokenAuthenticator, token string) (*request.User, bool, error) {
	var errs []error
	for _, a := range authns {
		u, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return u, true, nil
		}
	}
	if len(errs) > 0 {
		return nil, false, errors.Join(errs...)
	}
	return nil, false, fmt.Errorf("%w: unknown bearer token", ErrInvalidCredentials)
}

// StaticTokens are the tokens of --token-auth-file.
type StaticTokens struct {
	users map[string]*request.User
}

// LoadTokenFile reads upstream's token file: CSV lines token,user,uid[,"group1,group2"];
// lines starting with # and empty lines are skipped. Errors name the line.
func LoadTokenFile(path string) (*StaticTokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--token-auth-file: %w", err)
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens parses a token file's content; name is used in errors.
func ParseTokens(in io.Reader, name string) (*StaticTokens, error) {
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.Comment = '#'
	st := &StaticTokens{users: map[string]*request.User{}}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("token file %s: %w", name, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) < 3 {
			return nil, fmt.Errorf("token file %s line %d: want token,user,uid[,groups], got %d fields", name, line, len(rec))
		}
		token, user, uid := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
		if token == "" || user == "" {
			return nil, fmt.Errorf("token file %s line %d: empty token or user", name, line)
		}
		if _, dup := st.users[token]; dup {
			return nil, fmt.Errorf("token file %s line %d: duplicate token", name, line)
		}
		var groups []string
		if len(rec) > 3 {
			for _, g := range strings.Split(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					groups = append(groups, g)
				}
			}
		}
		st.users[token] = &request.User{Name: user, UID: uid, Groups: withAuthenticated(groups)}
	}
	return st, nil
}

// AuthenticateToken implements TokenAuthenticator. Tokens are compared in constant time.
func (st *StaticTokens) AuthenticateToken(_ context.Context, token string) (*request.User, bool, error) {
	for t, u := range st.users {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			cp := *u
			cp.Groups = slices.Clone(u.Groups)
			return &cp, true, nil
		}
	}
	return nil, false, nil
}
