// Package gateway is Kube's HTTP(S) gateway: the data plane of the Route kind
// (kubeos.dev/v1alpha1), run by a node agent (kube agent, or kube server --agent) on ports
// of the node.
//
// The job splits in a pure core and a thin shell:
//
//   - [Compile] turns what the informers hold (Routes, Services, EndpointSlices, Releases,
//     TLS Secrets) into a [Table]: per hostname the Routes' match entries sorted by Gateway
//     API HTTPRoute precedence, each with its filters, timeout, retries and weighted
//     backends resolved to ready endpoint addresses (pod IPs, so the gateway works without
//     the Service proxy). No clients, clocks or goroutines; table-tested.
//   - [Table.Route] picks the entry for a request: the most specific hostname (exact, then
//     the longest wildcard suffix; "*.example.com" matches one or more labels), then the
//     first entry of that hostname that matches, in this order of precedence: an Exact path,
//     then a RegularExpression path (the longer first; Gateway API leaves regex precedence to
//     the implementation), then the longest PathPrefix; then a method match; then more
//     header matches; then more query parameter matches; then the oldest Route, then
//     namespace/name alphabetically; then the rule's and the match's order in the Route.
//   - [Gateway] serves HTTP and HTTPS (SNI picks a certificate from the Secret of the
//     Route's Certificate) with its own proxy core on net/http's Transport (forward: what
//     httputil.ReverseProxy does to an exchange — hop-by-hop headers, X-Forwarded-*, 1xx,
//     trailers, streaming flushes — without its per-request clones; protocol upgrades go
//     through httputil.ReverseProxy): filters
//     (RequestHeaderModifier, URLRewrite, RequestRedirect, ResponseHeaderModifier), a
//     per-rule request timeout (504), retries on connection failure to another endpoint,
//     a backend chosen per request by weight. A Release's canary weight splits a backend
//     between the Services <component>-canary and <component>-stable. The table is swapped
//     atomically, so a reload drops no connection; each request is counted per Route in
//     Prometheus metrics (kube_gateway_*, the series bound to the rules at the swap) and,
//     when asked, written to the access log (a logfmt line appended to a buffer that is
//     written in chunks, at the latest 100 ms later).
//   - [Gateway.Run] compiles the table from informers: the first change after a quiet spell
//     at once, a burst of changes (EndpointSlice churn) coalesced into one compilation per
//     Options.BuildInterval (100 ms, or twice the last compilation's time if longer).
//
// The request path allocates no proxy and looks up no metric labels: one keep-alive
// Transport serves every Route; the inbound request, its headers changed in place, is the
// outbound one; a request costs one exchange record (outbound URL, body wrapper and 1xx
// hook included), its context, a few header values, and what net/http allocates.
//
// A hostname whose status says Accepted=False (the tenant's allowed hostnames changed after
// the Route was admitted) is not served.
//
// Answers: no Route for the host or no matching rule → 404; a backend whose Service does
// not exist → 500 (Gateway API's answer for an unresolved backend); no ready endpoint →
// 503, after the request waited up to a second for a table that gives it one (a table is
// built from several informers' caches, which can disagree for a moment); the upstream
// unreachable after the retries → 502; the rule's timeout → 504.
package gateway
