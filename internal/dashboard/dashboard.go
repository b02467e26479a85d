package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Prefix is where the dashboard is served.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every answer: scripts and styles only from the
// dashboard's own embedded files (no inline script, no eval), nothing from elsewhere, no
// framing, forms only to itself.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed assets templates
var files embed.FS

// Options configure the dashboard.
type Options struct {
	// API is the server's handler chain (authentication, impersonation, flow control,
	// authorization, audit and the API behind them). Every read and write the dashboard
	// makes goes through it with the browser user's credential.
	API http.Handler
	// Suspendable reports whether a lifecycle-managed resource has spec.suspend (the
	// suspend action is offered only there). nil: none has.
	Suspendable func(group, resource string) bool
	// Log receives the dashboard's own errors (never a credential).
	Log *slog.Logger
	// SessionTTL bounds a login's life (default 8 h); SessionIdle the time between two
	// requests of one session (default 1 h).
	SessionTTL, SessionIdle time.Duration
	// PageSize is the length of a kind list's page (default 50).
	PageSize int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Dashboard is the operator dashboard's http.Handler.
type Dashboard struct {
	o        Options
	mux      *http.ServeMux
	sessions *sessions
	pages    map[string]*template.Template
	static   http.Handler

	versionsMu sync.Mutex
	versions   map[string]versionEntry
}

type versionEntry struct {
	version string
	at      time.Time
}

var _ http.Handler = (*Dashboard)(nil)

// New builds the dashboard; it starts nothing (sessions expire lazily).
func New(o Options) (*Dashboard, error) {
	if o.API == nil {
		return nil, errors.New("dashboard: Options.API is required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = 8 * time.Hour
	}
	if o.SessionIdle == 0 {
		o.SessionIdle = time.Hour
	}
	if o.PageSize == 0 {
		o.PageSize = 50
	}
	if o.Suspendable == nil {
		o.Suspendable = func(string, string) bool { return false }
	}
	d := &Dashboard{o: o, sessions: newSessions(o.SessionTTL, o.SessionIdle, o.Now), versions: map[string]versionEntry{}}
	var err error
	if d.pages, err = parseTemplates(); err != nil {
		return nil, err
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	d.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(assets))
	m := http.NewServeMux()
	m.HandleFunc("GET "+Prefix+"static/", d.serveStatic)
	m.HandleFunc("GET "+Prefix+"login", d.loginForm)
	m.HandleFunc("POST "+Prefix+"login", d.login)
	m.HandleFunc("POST "+Prefix+"logout", d.authed(d.logout))
	m.HandleFunc("GET "+Prefix+"{$}", d.authed(d.healthPage))
	m.HandleFunc("GET "+Prefix+"kinds/{resource}", d.authed(d.kindPage))
	m.HandleFunc("GET "+Prefix+"objects/{resource}/{namespace}/{name}", d.authed(d.objectPage))
	m.HandleFunc("POST "+Prefix+"actions", d.authed(d.action))
	m.HandleFunc("GET "+Prefix+"stream", d.authed(d.stream))
	m.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, nil, http.StatusNotFound, "Not found", "There is no such page.")
	})
	d.mux = m
	return d, nil
}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			d.o.Log.Error("panic serving dashboard request", "path", r.URL.Path, "panic", p)
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	d.mux.ServeHTTP(w, r)
}

func (d *Dashboard) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	d.static.ServeHTTP(w, r)
}

// user is the browser's identity for one request.
type user struct {
	cred credential
	// credID names the credential for CSRF tokens: the session ID or the certificate's hash.
	credID    string
	sessionID string
	// name is the authenticated user's name (from the session, or the certificate).
	name string
	cfg  *rest.Config
}

func (u *user) dynamic() (dynamic.Interface, error)      { return dynamic.NewForConfig(u.cfg) }
func (u *user) clientset() (kubernetes.Interface, error) { return kubernetes.NewForConfig(u.cfg) }

type ctxKey struct{}

func userFrom(ctx context.Context) *user { u, _ := ctx.Value(ctxKey{}).(*user); return u }

// authed resolves the browser's credential: the session cookie first, then a TLS client
// certificate. Without either, pages redirect to the login form and the stream and writes
// answer 401; an unknown or expired session answers 401 (and clears the cookie).
func (d *Dashboard) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, state := d.identify(r)
		switch state {
		case credNone:
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/stream") && r.Header.Get(fragmentHeader) == "" {
				http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			d.unauthorized(w, r, "")
			return
		case credExpired:
			d.unauthorized(w, r, "Your session has ended. Log in again.")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
	}
}

type credState int

const (
	credNone credState = iota
	credExpired
	credOK
)

func (d *Dashboard) identify(r *http.Request) (*user, credState) {
	remote := r.RemoteAddr
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		tok, name, ok := d.sessions.lookupUser(c.Value)
		if !ok {
			return nil, credExpired
		}
		cred := credential{token: tok, remote: remote}
		return &user{cred: cred, credID: "session:" + c.Value, sessionID: c.Value, name: name, cfg: restConfig(d.o.API, cred)}, credOK
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cert := r.TLS.PeerCertificates[0]
		sum := sha256.Sum256(cert.Raw)
		cred := credential{tls: r.TLS, remote: remote}
		return &user{cred: cred, credID: "cert:" + hex.EncodeToString(sum[:]), name: cert.Subject.CommonName, cfg: restConfig(d.o.API, cred)}, credOK
	}
	return nil, credNone
}

// whoAmI asks the API who a credential is (a SelfSubjectReview, through the chain).
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// sameOrigin is the cross-site check of every write: the browser's Origin (or, failing
// that, Referer) must be this server, and Sec-Fetch-Site, when sent, same-origin.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	want := "https://" + r.Host
	if o := r.Header.Get("Origin"); o != "" {
		return o == want
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		return err == nil && u.Scheme+"://"+u.Host == want
	}
	return false
}

// checkWrite refuses a write that is cross-site or lacks the credential's CSRF token.
func (d *Dashboard) checkWrite(w http.ResponseWriter, r *http.Request, u *user) bool {
	if !sameOrigin(r) {
		d.fail(w, r, u, http.StatusForbidden, "Forbidden", "Cross-site request refused.")
		return false
	}
	if !d.sessions.validCSRF(u.credID, r.PostFormValue("csrf")) {
		d.fail(w, r, u, http.StatusForbidden, "Forbidden", "Missing or invalid CSRF token: reload the page and try again.")
		return false
	}
	return true
}

// apiError turns an API error into a page: 401 ends the session, others show the
// server's message (it is about the user's own request).
func (d *Dashboard) apiError(w http.ResponseWriter, r *http.Request, u *user, err error) {
	var se apierrors.APIStatus
	switch {
	case apierrors.IsUnauthorized(err):
		if u != nil && u.sessionID != "" {
			d.sessions.remove(u.sessionID)
		}
		d.unauthorized(w, r, "Your credential is no longer accepted. Log in again.")
	case apierrors.IsForbidden(err):
		d.fail(w, r, u, http.StatusForbidden, "Forbidden", err.Error())
	case apierrors.IsNotFound(err):
		d.fail(w, r, u, http.StatusNotFound, "Not found", err.Error())
	case errors.As(err, &se):
		code := int(se.Status().Code)
		if code < 400 {
			code = http.StatusBadGateway
		}
		d.fail(w, r, u, code, http.StatusText(code), err.Error())
	default:
		d.o.Log.Error("dashboard request failed", "path", r.URL.Path, "err", err)
		d.fail(w, r, u, http.StatusInternalServerError, "Error", "The server could not answer this request.")
	}
}

func (d *Dashboard) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, sessionCookie("", -1))
	if msg == "" {
		msg = "Log in to continue."
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_ = d.pages["login"].ExecuteTemplate(w, "layout", page{Title: "Log in", Flash: msg, Content: loginData{}})
}

func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, u *user, code int, title, msg string) {
	p := page{Title: title, Content: errorData{Code: code, Title: title, Message: msg}}
	if u != nil {
		p.User, p.CSRF = u.name, d.sessions.csrfToken(u.credID)
	}
	d.render(w, r, code, "error", p)
}

// fragmentHeader asks for a page's content only (the live updates' refresh).
const fragmentHeader = "X-Kube-Fragment"

// page is what the layout shows around every view.
type page struct {
	Title string
	User  string
	CSRF  string
	// Stream is the live-update stream of the view ("" for none).
	Stream  string
	Flash   string
	Content any
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	t, ok := d.pages[name]
	if !ok {
		panic(fmt.Sprintf("dashboard: no template %q", name))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	what := "layout"
	if r.Header.Get(fragmentHeader) != "" {
		what = "content"
	}
	if err := t.ExecuteTemplate(w, what, p); err != nil {
		d.o.Log.Error("render dashboard page", "page", name, "err", err)
	}
}
