package server

import (
	"net/http"
	"strings"

	"kubeos.dev/kube/internal/dashboard"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// withDashboard serves the operator dashboard at /ui/ in front of api, the filter chain:
// the dashboard must answer browsers without credentials (a login page), and makes every
// request of its own through api with the browser user's credential (internal/dashboard).
// Everything else goes to api unchanged.
func (s *Server) withDashboard(api http.Handler) http.Handler {
	d, err := dashboard.New(dashboard.Options{API: api, Log: s.opts.Log.With("component", "dashboard"), Suspendable: suspendable()})
	if err != nil {
		// Only the embedded templates can fail to parse: a defect of the binary, not of input.
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ui":
			http.Redirect(w, r, dashboard.Prefix, http.StatusMovedPermanently)
		case strings.HasPrefix(r.URL.Path, dashboard.Prefix):
			d.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// suspendable reports which kubeos.dev resources have spec.suspend, from their CRDs'
// schemas.
func suspendable() func(group, resource string) bool {
	has := map[string]bool{}
	for _, crd := range v1alpha1.CRDs(nil) {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			if spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]; ok {
				if _, ok := spec.Properties["suspend"]; ok {
					has[crd.Spec.Names.Plural] = true
				}
			}
		}
	}
	return func(group, resource string) bool { return group == v1alpha1.Group && has[resource] }
}
