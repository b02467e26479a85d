package gateway

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// modifyHeaders applies a HeaderModifier: set replaces, add appends, remove deletes.
func modifyHeaders(h http.Header, m *v1alpha1.HeaderModifier) {
	if m == nil {
		return
	}
	for _, s := range m.Set {
		h.Set(s.Name, s.Value)
	}
	for _, a := range m.Add {
		h.Add(a.Name, a.Value)
	}
	for _, r := range m.Remove {
		h.Del(r)
	}
}

// replacePrefix is URLRewrite's ReplacePrefixMatch: the matched prefix of path becomes
// repl ("/foo" → "/bar": "/foo/x" → "/bar/x"; → "/": "/foo/x" → "/x").
func replacePrefix(path, prefix, repl string) string {
	if prefix == "/" {
		prefix = ""
	}
	rest := strings.TrimPrefix(path, prefix)
	switch {
	case rest == "":
		if repl == "" {
			return "/"
		}
		return repl
	case strings.HasSuffix(repl, "/"):
		return repl + strings.TrimPrefix(rest, "/")
	default:
		return repl + rest
	}
}

// redirectLocation is a RequestRedirect's Location and status code. scheme is the
// request's ("http"/"https") and listenerPort the port it came in on. The port is left
// out when it is the scheme's well-known one (Gateway API's rule).
func redirectLocation(r *http.Request, scheme string, listenerPort int, rd *v1alpha1.RouteRedirect, prefix string) (string, int) {
	code := http.StatusFound
	if rd.StatusCode != 0 {
		code = int(rd.StatusCode)
	}
	u := url.URL{Scheme: scheme, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	host := hostOnly(r.Host)
	port := listenerPort
	if rd.Scheme != "" {
		u.Scheme = rd.Scheme
		port = map[string]int{"http": 80, "https": 443}[rd.Scheme]
		if port == 0 {
			port = listenerPort
		}
	}
	if rd.Hostname != "" {
		host = rd.Hostname
	}
	if rd.Port != nil {
		port = int(*rd.Port)
	}
	if rd.Path != "" {
		u.Path = rd.Path
	}
	if (u.Scheme == "http" && port == 80) || (u.Scheme == "https" && port == 443) || port == 0 {
		u.Host = host
	} else {
		u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	_ = prefix
	return u.String(), code
}
