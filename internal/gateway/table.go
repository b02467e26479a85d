package gateway

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/textproto"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// AnnotationCertificate on a TLS Secret names the Certificate that wrote it.
const AnnotationCertificate = "kubeos.dev/certificate"

// Input is what a Table is compiled from: the informers' objects, read-only.
type Input struct {
	Routes         []*v1alpha1.Route
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Releases       []*v1alpha1.Release
	// Secrets are TLS Secrets (type kubernetes.io/tls); those of a Certificate carry
	// AnnotationCertificate.
	Secrets []*corev1.Secret
}

// Table is a compiled, immutable route table.
type Table struct {
	exact map[string][]*entry
	// wild is keyed by the suffix of a "*." hostname (".example.com").
	wild   map[string][]*entry
	certs  map[string]*tls.Certificate
	wcerts map[string]*tls.Certificate
	// Problems are what could not be compiled (bad regexes, missing certificates), for logs.
	Problems []string
}

// RouteKey names a Route (namespace/name).
type RouteKey struct{ Namespace, Name string }

func (k RouteKey) String() string { return k.Namespace + "/" + k.Name }

// entry is one match of one rule of one Route.
type entry struct {
	route   RouteKey
	created time.Time
	ruleIdx int
	matchIx int
	match   compiledMatch
	rule    *Rule
}

type compiledMatch struct {
	pathType  string
	pathValue string
	pathRe    *regexp.Regexp
	method    string
	headers   []valueMatch
	query     []valueMatch
}

type valueMatch struct {
	name  string
	value string
	re    *regexp.Regexp
}

// Rule is a compiled RouteRule: what a request that matched gets.
type Rule struct {
	Route   RouteKey
	Index   int
	Filters []v1alpha1.RouteFilter
	Timeout time.Duration
	Retries int
	// Targets share the rule's traffic by weight (a redirect rule has none).
	Targets []*Target
	total   int64
	// BackendProblem is set when the rule has backends but none resolved (500).
	BackendProblem string
	// respMods are the ResponseHeaderModifier filters, in order.
	respMods []*v1alpha1.HeaderModifier
	// metrics are the Route's series, bound when a Gateway swaps the table in (the request
	// path does no label lookups).
	metrics atomic.Pointer[routeMetrics]
}

// Target is one Service port's ready endpoints with its share of a rule's traffic.
type Target struct {
	// Service is namespace/name of the Service the addresses come from.
	Service string
	Weight  int64
	// Addrs are host:port of ready endpoints.
	Addrs []string
	// Problem says why a target has no address (no Service, no port).
	Problem string
	next    atomic.Uint64
}

// Match is the result of routing a request.
type Match struct {
	Rule *Rule
	// PrefixLen is the length of the matched PathPrefix (URLRewrite's ReplacePrefixMatch).
	Prefix string
}

// Compile builds the table. It never fails as a whole: what cannot be compiled is left out
// and listed in Problems.
func Compile(in Input) *Table {
	t := &Table{exact: map[string][]*entry{}, wild: map[string][]*entry{}, certs: map[string]*tls.Certificate{},
		wcerts: map[string]*tls.Certificate{}}
	svcs := map[string]*corev1.Service{}
	for _, s := range in.Services {
		svcs[s.Namespace+"/"+s.Name] = s
	}
	slicesBySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, es := range in.EndpointSlices {
		if svc := es.Labels[discoveryv1.LabelServiceName]; svc != "" {
			k := es.Namespace + "/" + svc
			slicesBySvc[k] = append(slicesBySvc[k], es)
		}
	}
	canary := map[string]int32{} // ns/component → weight
	for _, r := range in.Releases {
		if r.Status.CanaryWeight != nil {
			canary[r.Namespace+"/"+r.Spec.Component] = *r.Status.CanaryWeight
		}
	}
	certByName := map[string]*corev1.Secret{}
	for _, s := range in.Secrets {
		name := s.Annotations[AnnotationCertificate]
		if name == "" {
			name = s.Name
		}
		certByName[s.Namespace+"/"+name] = s
		if _, ok := certByName[s.Namespace+"/secret:"+s.Name]; !ok {
			certByName[s.Namespace+"/secret:"+s.Name] = s
		}
	}
	routes := slices.Clone(in.Routes)
	for _, r := range routes {
		key := RouteKey{r.Namespace, r.Name}
		var es []*entry
		for ri, rr := range r.Spec.Rules {
			rule := &Rule{Route: key, Index: ri, Filters: rr.Filters, Retries: int(rr.Retries)}
			if rr.Timeout != nil {
				rule.Timeout = rr.Timeout.Duration
			}
			for _, f := range rr.Filters {
				if f.Type == v1alpha1.FilterResponseHeaderModifier && f.ResponseHeaderModifier != nil {
					rule.respMods = append(rule.respMods, f.ResponseHeaderModifier)
				}
			}
			compileBackends(rule, r.Namespace, rr.Backends, svcs, slicesBySvc, canary)
			matches := rr.Matches
			if len(matches) == 0 {
				matches = []v1alpha1.RouteMatch{{}}
			}
			for mi, m := range matches {
				cm, err := compileMatch(m)
				if err != nil {
					t.Problems = append(t.Problems, fmt.Sprintf("route %s rule %d match %d: %v", key, ri, mi, err))
					continue
				}
				es = append(es, &entry{route: key, created: r.CreationTimestamp.Time, ruleIdx: ri, matchIx: mi, match: cm, rule: rule})
			}
		}
		var cert *tls.Certificate
		if r.Spec.TLS != nil && r.Spec.TLS.Certificate != "" {
			s := certByName[r.Namespace+"/"+r.Spec.TLS.Certificate]
			if s == nil {
				t.Problems = append(t.Problems, fmt.Sprintf("route %s: no Secret of Certificate %s", key, r.Spec.TLS.Certificate))
			} else if c, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
				t.Problems = append(t.Problems, fmt.Sprintf("route %s: Certificate %s: %v", key, r.Spec.TLS.Certificate, err))
			} else {
				cert = &c
			}
		}
		for _, h := range r.Spec.Hostnames {
			if refused(r, h) {
				t.Problems = append(t.Problems, fmt.Sprintf("route %s: hostname %s not Accepted", key, h))
				continue
			}
			h = strings.ToLower(strings.TrimSuffix(h, "."))
			if suffix, ok := strings.CutPrefix(h, "*"); ok {
				t.wild[suffix] = append(t.wild[suffix], es...)
				if cert != nil && t.wcerts[suffix] == nil {
					t.wcerts[suffix] = cert
				}
				continue
			}
			t.exact[h] = append(t.exact[h], es...)
			if cert != nil && t.certs[h] == nil {
				t.certs[h] = cert
			}
		}
	}
	for h, es := range t.exact {
		sortEntries(es)
		t.exact[h] = es
	}
	for s, es := range t.wild {
		sortEntries(es)
		t.wild[s] = es
	}
	return t
}

// compileBackends resolves a rule's backends to targets: the Service <component>'s port
// (by number, name, or the only one), its ready endpoints; split between
// <component>-canary and <component>-stable when a Release has a canary weight and both
// Services exist (a side without ready endpoints gives its share to the other; neither
// ready: the Service <component>).
func compileBackends(rule *Rule, ns string, backends []v1alpha1.RouteBackend, svcs map[string]*corev1.Service,
	eps map[string][]*discoveryv1.EndpointSlice, canary map[string]int32) {
	if len(backends) == 0 {
		return
	}
	for _, b := range backends {
		w := int64(1)
		if b.Weight != nil {
			w = int64(*b.Weight)
		}
		if w <= 0 {
			continue
		}
		main := svcs[ns+"/"+b.Component]
		cw, hasCanary := canary[ns+"/"+b.Component]
		cs, ss := svcs[ns+"/"+b.Component+"-canary"], svcs[ns+"/"+b.Component+"-stable"]
		if hasCanary && cs != nil && ss != nil {
			cw = min(max(cw, 0), 100)
			pn, port := backendPort(main, b)
			if main == nil {
				pn, port = b.PortName, b.Port
			}
			// Only a side with ready endpoints takes its share: a canary whose pods are not
			// ready yet (or a track Service whose EndpointSlices are not filled in) must not
			// turn its share into 503s. With neither ready, the Service <component> serves.
			ct, st := resolveTarget(cs, pn, port, w*int64(cw), eps), resolveTarget(ss, pn, port, w*int64(100-cw), eps)
			switch cReady, sReady := cw > 0 && len(ct.Addrs) > 0, cw < 100 && len(st.Addrs) > 0; {
			case cReady && sReady:
				rule.Targets = append(rule.Targets, ct, st)
				continue
			case cReady:
				ct.Weight = w * 100
				rule.Targets = append(rule.Targets, ct)
				continue
			case sReady:
				st.Weight = w * 100
				rule.Targets = append(rule.Targets, st)
				continue
			}
		}
		if main == nil {
			rule.Targets = append(rule.Targets, &Target{Service: ns + "/" + b.Component, Weight: w * 100,
				Problem: fmt.Sprintf("Service %s/%s not found", ns, b.Component)})
			continue
		}
		pn, port := backendPort(main, b)
		rule.Targets = append(rule.Targets, resolveTarget(main, pn, port, w*100, eps))
	}
	for _, tg := range rule.Targets {
		rule.total += tg.Weight
	}
	if rule.total == 0 {
		rule.BackendProblem = "no backend has a weight"
	}
}

// backendPort is the Service port a backend names: by number, by name, or the only one.
func backendPort(svc *corev1.Service, b v1alpha1.RouteBackend) (string, int32) {
	if svc == nil {
		return b.PortName, b.Port
	}
	for _, p := range svc.Spec.Ports {
		if (b.Port != 0 && p.Port == b.Port) || (b.PortName != "" && p.Name == b.PortName) || (b.Port == 0 && b.PortName == "" && len(svc.Spec.Ports) == 1) {
			return p.Name, p.Port
		}
	}
	return b.PortName, b.Port
}

// resolveTarget finds the ready endpoints of svc's port (by its name, or its number).
func resolveTarget(svc *corev1.Service, portName string, port int32, weight int64, eps map[string][]*discoveryv1.EndpointSlice) *Target {
	key := svc.Namespace + "/" + svc.Name
	tg := &Target{Service: key, Weight: weight}
	var sp *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if (port != 0 && p.Port == port) || (port == 0 && p.Name == portName) {
			sp = &svc.Spec.Ports[i]
			break
		}
	}
	if sp == nil {
		tg.Problem = fmt.Sprintf("Service %s has no port %s", key, portLabel(portName, port))
		return tg
	}
	seen := map[string]bool{}
	for _, es := range eps[key] {
		if es.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		target := int32(0)
		for _, p := range es.Ports {
			if p.Port != nil && ptrString(p.Name) == sp.Name {
				target = *p.Port
			}
		}
		if target == 0 {
			if sp.TargetPort.IntValue() == 0 {
				continue
			}
			target = int32(sp.TargetPort.IntValue())
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				hp := net.JoinHostPort(a, strconv.Itoa(int(target)))
				if !seen[hp] {
					seen[hp] = true
					tg.Addrs = append(tg.Addrs, hp)
				}
			}
		}
	}
	sort.Strings(tg.Addrs)
	return tg
}

func portLabel(name string, port int32) string {
	if name != "" {
		return name
	}
	return strconv.Itoa(int(port))
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// compileMatch checks and compiles one RouteMatch (none: PathPrefix /).
func compileMatch(m v1alpha1.RouteMatch) (compiledMatch, error) {
	cm := compiledMatch{pathType: v1alpha1.PathPrefix, pathValue: "/", method: strings.ToUpper(m.Method)}
	if m.Path != nil {
		if m.Path.Type != "" {
			cm.pathType = m.Path.Type
		}
		cm.pathValue = m.Path.Value
		switch cm.pathType {
		case v1alpha1.PathExact, v1alpha1.PathPrefix:
			if !strings.HasPrefix(cm.pathValue, "/") {
				return cm, fmt.Errorf("path %q does not start with /", cm.pathValue)
			}
			if cm.pathType == v1alpha1.PathPrefix && len(cm.pathValue) > 1 {
				cm.pathValue = strings.TrimRight(cm.pathValue, "/")
				if cm.pathValue == "" {
					cm.pathValue = "/"
				}
			}
		case v1alpha1.MatchRegularExpression:
			re, err := regexp.Compile("^(?:" + cm.pathValue + ")$")
			if err != nil {
				return cm, fmt.Errorf("path regex: %w", err)
			}
			cm.pathRe = re
		default:
			return cm, fmt.Errorf("path type %q is not supported", cm.pathType)
		}
	}
	var err error
	if cm.headers, err = compileValues(m.Headers, true); err != nil {
		return cm, fmt.Errorf("headers: %w", err)
	}
	if cm.query, err = compileValues(m.QueryParams, false); err != nil {
		return cm, fmt.Errorf("queryParams: %w", err)
	}
	return cm, nil
}

func compileValues(vs []v1alpha1.ValueMatch, header bool) ([]valueMatch, error) {
	var out []valueMatch
	for _, v := range vs {
		name := v.Name
		if header {
			name = textproto.CanonicalMIMEHeaderKey(name)
		}
		vm := valueMatch{name: name, value: v.Value}
		switch v.Type {
		case "", v1alpha1.MatchExact:
		case v1alpha1.MatchRegularExpression:
			re, err := regexp.Compile("^(?:" + v.Value + ")$")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.Name, err)
			}
			vm.re = re
		default:
			return nil, fmt.Errorf("%s: match type %q is not supported", v.Name, v.Type)
		}
		out = append(out, vm)
	}
	return out, nil
}

// pathRank orders path match types: Exact, RegularExpression, PathPrefix.
func pathRank(t string) int {
	switch t {
	case v1alpha1.PathExact:
		return 0
	case v1alpha1.MatchRegularExpression:
		return 1
	default:
		return 2
	}
}

// sortEntries orders entries by HTTPRoute precedence (see the package doc).
func sortEntries(es []*entry) {
	sort.SliceStable(es, func(i, j int) bool { return before(es[i], es[j]) })
}

func before(a, b *entry) bool {
	if ra, rb := pathRank(a.match.pathType), pathRank(b.match.pathType); ra != rb {
		return ra < rb
	}
	if la, lb := len(a.match.pathValue), len(b.match.pathValue); la != lb {
		return la > lb
	}
	if ma, mb := a.match.method != "", b.match.method != ""; ma != mb {
		return ma
	}
	if ha, hb := len(a.match.headers), len(b.match.headers); ha != hb {
		return ha > hb
	}
	if qa, qb := len(a.match.query), len(b.match.query); qa != qb {
		return qa > qb
	}
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	if a.route != b.route {
		return a.route.String() < b.route.String()
	}
	if a.ruleIdx != b.ruleIdx {
		return a.ruleIdx < b.ruleIdx
	}
	return a.matchIx < b.matchIx
}

// refused reports whether the Route's status says a hostname is not Accepted (the tenant's
// allowed hostnames changed after the Route was admitted): it is not served.
func refused(r *v1alpha1.Route, h string) bool {
	for _, hs := range r.Status.Hostnames {
		if hs.Hostname != h {
			continue
		}
		for _, c := range hs.Conditions {
			if c.Type == "Accepted" && c.Status == metav1.ConditionFalse {
				return true
			}
		}
	}
	return false
}
