package platform

import (
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func TestExposedPort(t *testing.T) {
	two := []v1alpha1.ComponentPort{{Name: "http", Port: 8080}, {Name: "admin", Port: 9090}}
	one := []v1alpha1.ComponentPort{{Port: 80}}
	for _, c := range []struct {
		name    string
		exposes []v1alpha1.ComponentPort
		b       v1alpha1.RouteBackend
		want    int32 // 0: error
	}{
		{"by number", two, v1alpha1.RouteBackend{Port: 9090}, 9090},
		{"by name", two, v1alpha1.RouteBackend{PortName: "http"}, 8080},
		{"number and name agree", two, v1alpha1.RouteBackend{Port: 8080, PortName: "http"}, 8080},
		{"number and name disagree", two, v1alpha1.RouteBackend{Port: 8080, PortName: "admin"}, 0},
		{"not exposed", two, v1alpha1.RouteBackend{Port: 81}, 0},
		{"several, none named", two, v1alpha1.RouteBackend{}, 0},
		{"the only one", one, v1alpha1.RouteBackend{}, 80},
		{"nothing exposed", nil, v1alpha1.RouteBackend{Port: 80}, 0},
	} {
		p, err := ExposedPort(c.exposes, c.b)
		if (err == nil) != (c.want != 0) || (err == nil && p.Port != c.want) {
			t.Errorf("%s: %v %v, want %d", c.name, p, err, c.want)
		}
	}
}

func TestUncoveredHostnames(t *testing.T) {
	for _, c := range []struct {
		hosts, dns, want []string
	}{
		{[]string{"shop.test"}, []string{"shop.test"}, nil},
		{[]string{"a.shop.test", "shop.test"}, []string{"*.shop.test"}, []string{"shop.test"}},
		{[]string{"a.b.shop.test"}, []string{"*.shop.test"}, []string{"a.b.shop.test"}},
		{[]string{"*.shop.test"}, []string{"*.shop.test"}, nil},
		{[]string{"*.shop.test"}, []string{"a.shop.test"}, []string{"*.shop.test"}},
		{[]string{"Shop.Test"}, []string{"shop.test"}, nil},
	} {
		if got := UncoveredHostnames(c.hosts, c.dns); !slices.Equal(got, c.want) {
			t.Errorf("UncoveredHostnames(%v, %v) = %v, want %v", c.hosts, c.dns, got, c.want)
		}
	}
}

func TestHostnameRules(t *testing.T) {
	allowed := []string{"shop.test", "*.shop.test"}
	for h, want := range map[string]bool{"shop.test": true, "a.shop.test": true, "a.b.shop.test": true, "*.shop.test": true,
		"*.a.shop.test": true, "evilshop.test": false, "other.test": false, "*.test": false} {
		if got := HostnameAllowed(h, allowed); got != want {
			t.Errorf("HostnameAllowed(%q) = %v", h, got)
		}
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.test", "a.test", true}, {"a.test", "b.test", false}, {"*.a.test", "x.a.test", true}, {"x.a.test", "*.a.test", true},
		{"*.a.test", "a.test", false}, {"*.a.test", "*.b.a.test", true}, {"*.a.test", "*.b.test", false}, {"*.a.test", "y.x.a.test", true},
	} {
		if got := HostnamesOverlap(c.a, c.b); got != c.want {
			t.Errorf("HostnamesOverlap(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestValidateRouteSpec(t *testing.T) {
	backends := []v1alpha1.RouteBackend{{Component: "web"}}
	for _, c := range []struct {
		name string
		spec v1alpha1.RouteSpec
		errs int
	}{
		{"ok", v1alpha1.RouteSpec{Hostnames: []string{"a.test"}, Rules: []v1alpha1.RouteRule{{Backends: backends}}}, 0},
		{"no hostname", v1alpha1.RouteSpec{Rules: []v1alpha1.RouteRule{{Backends: backends}}}, 1},
		{"bad regex", v1alpha1.RouteSpec{Hostnames: []string{"a.test"}, Rules: []v1alpha1.RouteRule{{Backends: backends,
			Matches: []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.MatchRegularExpression, Value: "("}},
				{Headers: []v1alpha1.ValueMatch{{Name: "x", Type: v1alpha1.MatchRegularExpression, Value: "[z"}}}}}}}, 2},
		{"redirect with backends", v1alpha1.RouteSpec{Hostnames: []string{"a.test"}, Rules: []v1alpha1.RouteRule{{Backends: backends,
			Filters: []v1alpha1.RouteFilter{{Type: v1alpha1.FilterRequestRedirect, RequestRedirect: &v1alpha1.RouteRedirect{Scheme: "https"}}}}}}, 1},
		{"neither redirect nor backend", v1alpha1.RouteSpec{Hostnames: []string{"a.test"}, Rules: []v1alpha1.RouteRule{{}}}, 1},
		{"prefix rewrite on an exact match", v1alpha1.RouteSpec{Hostnames: []string{"a.test"}, Rules: []v1alpha1.RouteRule{{Backends: backends,
			Matches: []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathExact, Value: "/x"}}},
			Filters: []v1alpha1.RouteFilter{{Type: v1alpha1.FilterURLRewrite, URLRewrite: &v1alpha1.RouteURLRewrite{ReplacePrefixMatch: ptr.To("/")}}}}}}, 1},
	} {
		if errs := ValidateRouteSpec(&c.spec); len(errs) != c.errs {
			t.Errorf("%s: %v, want %d errors", c.name, errs, c.errs)
		}
	}
}

func TestRouteWaiting(t *testing.T) {
	active, rec := lifecycle.PhaseActive, lifecycle.PhaseReconciling
	for _, c := range []struct {
		name      string
		activated bool
		phases    map[string]lifecycle.Phase
		want      []string
	}{
		{"first activation: every backend Active", false, map[string]lifecycle.Phase{"web": active, "api": active}, nil},
		{"first activation: one still rolling out", false, map[string]lifecycle.Phase{"web": active, "api": rec}, []string{"api"}},
		{"first activation: a backend with no phase yet", false, map[string]lifecycle.Phase{"web": active}, []string{"api"}},
		{"activated: a backend's later rollout does not hold it", true, map[string]lifecycle.Phase{"web": rec, "api": rec}, nil},
	} {
		if got := routeWaiting(c.activated, []string{"web", "api"}, c.phases); !slices.Equal(got, c.want) {
			t.Errorf("%s: routeWaiting = %v, want %v", c.name, got, c.want)
		}
	}
}
