package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// SessionCookie is the session cookie's name. The __Host- prefix makes the browser refuse it
// unless it is Secure, has Path=/ and no Domain.
const SessionCookie = "__Host-kube-session"

// session is one login: the bearer token pasted into the login form. It lives only in this
// process's memory (a restart logs everyone out); the cookie holds a random ID, never the
// token.
type session struct {
	token    string
	name     string
	created  time.Time
	lastSeen time.Time
}

// sessions is the server-side session map.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
	// ttl bounds a session's life, idle the time between two requests.
	ttl, idle time.Duration
	now       func() time.Time
	// key signs CSRF tokens.
	key []byte
}

func newSessions(ttl, idle time.Duration, now func() time.Time) *sessions {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("dashboard: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return &sessions{m: map[string]*session{}, ttl: ttl, idle: idle, now: now, key: key}
}

// create stores a session for token (of user name) and returns its ID.
func (s *sessions) create(token, name string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("dashboard: no randomness: " + err.Error())
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	s.m[id] = &session{token: token, name: name, created: now, lastSeen: now}
	return id
}

// lookupUser returns the token and user name of a live session and marks it used.
func (s *sessions) lookupUser(id string) (token, name string, ok bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	se, found := s.m[id]
	if !found {
		return "", "", false
	}
	if !alive(se, now, s.ttl, s.idle) {
		delete(s.m, id)
		return "", "", false
	}
	se.lastSeen = now
	return se.token, se.name, true
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

func (s *sessions) expireLocked(now time.Time) {
	for id, se := range s.m {
		if !alive(se, now, s.ttl, s.idle) {
			delete(s.m, id)
		}
	}
}

// alive says whether a session may still be used at now.
func alive(se *session, now time.Time, ttl, idle time.Duration) bool {
	return now.Before(se.created.Add(ttl)) && now.Before(se.lastSeen.Add(idle))
}

// csrfToken is the anti-forgery token of a credential: an HMAC of its ID (the session ID, or
// the client certificate's hash), so a page can only be driven by someone who read it.
func (s *sessions) csrfToken(credID string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("csrf\x00" + credID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *sessions) validCSRF(credID, token string) bool {
	want := s.csrfToken(credID)
	return token != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}

func sessionCookie(id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}
