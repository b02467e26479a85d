package gateway

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// Route finds the rule for a request (nil: none, 404). host is the request's Host without
// its port.
func (t *Table) Route(host string, r *http.Request) *Match {
	if m, ok := t.route(host, r); ok {
		return &m
	}
	return nil
}

// route is Route without the allocation (the request path's).
func (t *Table) route(host string, r *http.Request) (Match, bool) {
	es := t.hostEntries(host)
	var q url.Values
	for _, e := range es {
		if ok, prefix := e.match.matches(r, &q); ok {
			return Match{Rule: e.rule, Prefix: prefix}, true
		}
	}
	return Match{}, false
}

// hostEntries picks the most specific hostname: exact, then the longest wildcard suffix
// (tried label by label from the left: O(labels), not O(Routes)).
func (t *Table) hostEntries(host string) []*entry {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if es, ok := t.exact[host]; ok {
		return es
	}
	for i := strings.IndexByte(host, '.'); i > 0 && i < len(host)-1; {
		if es, ok := t.wild[host[i:]]; ok {
			return es
		}
		j := strings.IndexByte(host[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return nil
}

// Certificate is the certificate for a TLS ServerName (nil: none).
func (t *Table) Certificate(serverName string) *tls.Certificate {
	h := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if c := t.certs[h]; c != nil {
		return c
	}
	for i := strings.IndexByte(h, '.'); i > 0 && i < len(h)-1; {
		if c := t.wcerts[h[i:]]; c != nil {
			return c
		}
		j := strings.IndexByte(h[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return nil
}

// Hosts are the table's hostnames (tests, debugging).
func (t *Table) Hosts() []string {
	var out []string
	for h := range t.exact {
		out = append(out, h)
	}
	for s := range t.wild {
		out = append(out, "*"+s)
	}
	return out
}

// matches reports whether r matches, and the matched prefix for a PathPrefix match. q
// caches the parsed query.
func (m *compiledMatch) matches(r *http.Request, q *url.Values) (bool, string) {
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	prefix := ""
	switch m.pathType {
	case v1alpha1.PathExact:
		if path != m.pathValue {
			return false, ""
		}
	case v1alpha1.MatchRegularExpression:
		if !m.pathRe.MatchString(path) {
			return false, ""
		}
	default:
		if !prefixMatch(m.pathValue, path) {
			return false, ""
		}
		prefix = m.pathValue
	}
	if m.method != "" && r.Method != m.method {
		return false, ""
	}
	for _, h := range m.headers {
		if !anyValue(r.Header[h.name], h) {
			return false, ""
		}
	}
	if len(m.query) > 0 {
		if *q == nil {
			*q = r.URL.Query()
		}
		for _, p := range m.query {
			vs, ok := (*q)[p.name]
			if !ok || len(vs) == 0 || !p.ok(vs[0]) {
				return false, ""
			}
		}
	}
	return true, prefix
}

// prefixMatch is PathPrefix's element-wise match: "/foo" matches "/foo", "/foo/" and
// "/foo/bar", not "/foobar".
func prefixMatch(prefix, path string) bool {
	if prefix == "/" {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

func anyValue(vs []string, m valueMatch) bool {
	for _, v := range vs {
		if m.ok(v) {
			return true
		}
	}
	return false
}

func (m valueMatch) ok(v string) bool {
	if m.re != nil {
		return m.re.MatchString(v)
	}
	return v == m.value
}

// hostOnly strips the port from a Host header ("[::1]:80" → "::1"); a Host without one,
// the usual case, costs no error value.
func hostOnly(hostport string) string {
	if strings.IndexByte(hostport, ':') < 0 {
		return hostport
	}
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
