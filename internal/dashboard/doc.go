// Package dashboard is the operator dashboard `kube server` serves at /ui/ (issue 18): the
// lifecycle health table, a paged kind list, and per object its conditions, spec and status,
// Events, audit trail, dependency graph in both directions (the blocker `kube ctl why` finds
// highlighted) and, for a deleting object, `kube ctl why-stuck`'s answer. Plain
// server-rendered HTML (html/template: everything escaped) with one small embedded script;
// nothing is fetched from anywhere else.
//
// # Routes
//
//	GET  /ui/                                   health of every lifecycle kind (?ns= one namespace)
//	GET  /ui/kinds/RESOURCE                     a kind's objects: ?ns, phase, q (text), sort
//	                                            (name, age, phase, ready; "-" reverses), page
//	GET  /ui/objects/RESOURCE/NAMESPACE/NAME    one object ("-" as NAMESPACE: cluster-scoped)
//	POST /ui/actions                            delete, reconcile, suspend, resume
//	GET  /ui/stream?view=health|kind|object&... the page's live-update stream (text/event-stream)
//	GET  /ui/login, POST /ui/login, POST /ui/logout
//	GET  /ui/static/...                         app.js, app.css (embedded)
//
// The kinds come from the ops API's health list (internal/ctl/opsapi): whatever the
// lifecycle engine manages appears without code here. The version served is read from
// discovery.
//
// # Authentication and authorization
//
// The dashboard sits in front of the API's filter chain (it must answer a browser without
// credentials with a login page, which the chain would refuse) and holds no identity of its
// own. A browser proves who it is with either
//
//   - a bearer or service-account token pasted into the login form: it is checked with a
//     SelfSubjectReview made with that token, then kept in a server-side session map (in
//     memory: a restart logs everyone out; 8 h life, 1 h idle) named by a random 256-bit ID in
//     the cookie __Host-kube-session (Secure, HttpOnly, SameSite=Strict, Path=/), or
//   - a TLS client certificate presented to the server, used directly on every request.
//
// Every read and write the dashboard makes is an API request with that credential, handed
// in-process to the API's handler chain (transport.go): the same authenticators, RBAC, Node
// authorizer and AccessPolicy, flow control and audit log as any client — the audit log
// shows the user, not the dashboard. The ops API then shows only what the user may read.
// Nothing is cached across users except the group's preferred version.
//
// Pages are read-only unless a SelfSubjectAccessReview (as the user) allows an action:
// delete; reconcile (annotate kubeos.dev/reconcile=<time>); suspend or resume where the kind
// has spec.suspend (Options.Suspendable). A refused action is shown disabled with the answer
// to "why can't I". Every write (actions, logout, login) must come from this origin (Origin,
// else Referer, and Sec-Fetch-Site when sent) and, once logged in, carry the CSRF token of the
// page: an HMAC, under a per-process key, of the session ID or the certificate's hash.
//
// # Bad input
//
// No credential: pages redirect to /ui/login; the stream and writes answer 401. An unknown or
// expired session, or a token the API refuses, answers 401 with the login page and no
// detail. A cross-site or token-less write answers 403. Every answer carries a strict
// Content-Security-Policy (ContentSecurityPolicy: no inline script) and nosniff and
// frame-denying headers.
//
// # Live updates
//
// Each page opens one stream. The server watches, as the user, what the page shows (from the
// list's resourceVersion, so no flood of ADDED events) and sends a "change" event (coalesced
// over 250 ms); the page then fetches its own content again (X-Kube-Fragment) and swaps it
// in. The script reconnects with exponential back-off and jitter (1 s to 30 s) and stops
// for good on 401.
//
// # Paging
//
// A kind list in name order without a filter pages through the API with limit and continue
// tokens (a page of 50 costs the same at 10 or 10,000 objects); filtered or otherwise sorted,
// it asks the ops API's objects resource for the page: kube server filters, sorts and pages
// its lifecycle informer copies of the kind in memory (internal/ctl/listing) after
// authorizing a list of that kind in that scope as the user, so only one page crosses the
// API. The browser never holds more than one page.
package dashboard
