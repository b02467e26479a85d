package etcd

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ServersOverride is one entry of --etcd-servers-overrides (kube-apiserver's flag): the
// objects of one resource live in an etcd cluster of their own.
type ServersOverride struct {
	// Group is the API group, "" for the core group, and Resource the plural resource name,
	// as the flag spells them: "/events", "apps/deployments".
	Group, Resource string
	// Servers are the client URLs of the cluster's members.
	Servers []string
}

// overridesFormat is kube-apiserver's message for an entry it cannot split; Kube starts its
// own messages with it too, so that scripts matching upstream's still match.
const overridesFormat = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated"

// ParseServersOverrides parses the entries of --etcd-servers-overrides, each
// "group/resource#servers" with servers semicolon-separated URLs, e.g.
// "/events#http://127.0.0.1:2479" or "apps/deployments#http://a:2379;http://b:2379".
//
// The split is kube-apiserver's: exactly one "#", exactly one "/" before it (an empty group
// is the core group), no empty server. Kube also refuses what kube-apiserver would accept
// and then fail on or silently ignore: an empty or malformed group or resource name, a
// server that is not an http, https, unix or unixs URL, and a resource given twice
// (kube-apiserver keeps the last).
func ParseServersOverrides(entries []string) ([]ServersOverride, error) {
	var out []ServersOverride
	for _, e := range entries {
		o, err := parseServersOverride(e)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(out, func(p ServersOverride) bool { return p.Group == o.Group && p.Resource == o.Resource }); i >= 0 {
			return nil, fmt.Errorf("%s: %q: resource %s/%s is given twice", overridesFormat, e, o.Group, o.Resource)
		}
		out = append(out, o)
	}
	return out, nil
}

func parseServersOverride(e string) (ServersOverride, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %q: %s", overridesFormat, e, fmt.Sprintf(format, a...))
	}
	gr, servers, ok := strings.Cut(e, "#")
	if !ok || strings.Contains(servers, "#") {
		return ServersOverride{}, bad("want exactly one '#'")
	}
	group, resource, ok := strings.Cut(gr, "/")
	if !ok || strings.Contains(resource, "/") {
		return ServersOverride{}, bad("want exactly one '/' before '#' (\"/events\" for the core group)")
	}
	if group != "" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return ServersOverride{}, bad("group %q: %s", group, strings.Join(errs, "; "))
		}
	}
	if resource == "" {
		return ServersOverride{}, bad("no resource")
	}
	if errs := validation.IsDNS1123Subdomain(resource); len(errs) > 0 {
		return ServersOverride{}, bad("resource %q: %s", resource, strings.Join(errs, "; "))
	}
	o := ServersOverride{Group: group, Resource: resource}
	for s := range strings.SplitSeq(servers, ";") {
		if s == "" {
			return ServersOverride{}, bad("empty server")
		}
		if err := checkServerURL(s); err != nil {
			return ServersOverride{}, bad("server %q: %v", s, err)
		}
		o.Servers = append(o.Servers, s)
	}
	return o, nil
}

// checkServerURL accepts what the etcd client dials: http and https URLs with a host, and
// unix or unixs socket URLs.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("no host")
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("a client URL has no path or query")
		}
	case "unix", "unixs":
		if u.Host == "" && u.Path == "" {
			return fmt.Errorf("no socket path")
		}
	default:
		return fmt.Errorf("not an http, https, unix or unixs URL (e.g. http://127.0.0.1:2379)")
	}
	return nil
}

// SameServers reports whether a and b name the same members, in any order: overrides that
// name the main cluster's servers, or one another's, share its client.
func SameServers(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
