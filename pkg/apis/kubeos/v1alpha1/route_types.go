package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Path, header and filter kinds of a Route (Gateway API HTTPRoute's names).
const (
	PathExact              = "Exact"
	PathPrefix             = "PathPrefix"
	MatchExact             = "Exact"
	MatchRegularExpression = "RegularExpression"

	FilterRequestRedirect        = "RequestRedirect"
	FilterRequestHeaderModifier  = "RequestHeaderModifier"
	FilterResponseHeaderModifier = "ResponseHeaderModifier"
	FilterURLRewrite             = "URLRewrite"
)

// Route sends HTTP(S) for hostnames and paths to Components' ports through Kube's gateway,
// with Gateway API HTTPRoute's matching semantics. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RouteSpec   `json:"spec"`
	Status            RouteStatus `json:"status,omitempty"`
}

// RouteSpec is an HTTPRoute without parentRefs (the gateway is Kube's).
type RouteSpec struct {
	// Hostnames the Route serves (exact, or a leading "*." wildcard).
	Hostnames []string `json:"hostnames"`
	// Rules are matched as HTTPRoute's: the most specific match wins.
	Rules []RouteRule `json:"rules"`
	// TLS serves the hostnames over HTTPS with a Certificate of the namespace.
	TLS *RouteTLS `json:"tls,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// RouteRule is matches → filters → weighted backends.
type RouteRule struct {
	// Matches: any one matches (none: PathPrefix /).
	Matches []RouteMatch  `json:"matches,omitempty"`
	Filters []RouteFilter `json:"filters,omitempty"`
	// Backends share the rule's traffic by weight (a rule with a RequestRedirect has none).
	Backends []RouteBackend `json:"backends,omitempty"`
	// Timeout of a whole request (default none).
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Retries on connection failure to a backend (default 0).
	Retries int32 `json:"retries,omitempty"`
}

// RouteMatch is HTTPRouteMatch: all of its parts must match.
type RouteMatch struct {
	Path        *PathMatch   `json:"path,omitempty"`
	Headers     []ValueMatch `json:"headers,omitempty"`
	QueryParams []ValueMatch `json:"queryParams,omitempty"`
	Method      string       `json:"method,omitempty"`
}

// PathMatch is Exact, PathPrefix (default) or RegularExpression.
type PathMatch struct {
	Type  string `json:"type,omitempty"`
	Value string `json:"value"`
}

// ValueMatch matches a header or query parameter: Exact (default) or RegularExpression.
type ValueMatch struct {
	Type  string `json:"type,omitempty"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// RouteFilter is one HTTPRouteFilter.
type RouteFilter struct {
	Type                   string           `json:"type"`
	RequestRedirect        *RouteRedirect   `json:"requestRedirect,omitempty"`
	RequestHeaderModifier  *HeaderModifier  `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HeaderModifier  `json:"responseHeaderModifier,omitempty"`
	URLRewrite             *RouteURLRewrite `json:"urlRewrite,omitempty"`
}

// RouteRedirect answers with a redirect.
type RouteRedirect struct {
	Scheme   string `json:"scheme,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Port     *int32 `json:"port,omitempty"`
	// Path replaces the whole path.
	Path string `json:"path,omitempty"`
	// StatusCode is 301 or 302 (default 302).
	StatusCode int32 `json:"statusCode,omitempty"`
}

// HeaderModifier sets, adds and removes headers.
type HeaderModifier struct {
	Set    []HTTPHeader `json:"set,omitempty"`
	Add    []HTTPHeader `json:"add,omitempty"`
	Remove []string     `json:"remove,omitempty"`
}

// HTTPHeader is a header name and value.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// RouteURLRewrite rewrites the host and the matched path prefix.
type RouteURLRewrite struct {
	Hostname string `json:"hostname,omitempty"`
	// ReplacePrefixMatch replaces the matched PathPrefix.
	ReplacePrefixMatch *string `json:"replacePrefixMatch,omitempty"`
}

// RouteBackend is a Component's exposed port.
type RouteBackend struct {
	Component string `json:"component"`
	// Port is the Component's exposed port number (or PortName its name); one of them,
	// unless the Component exposes one port.
	Port     int32  `json:"port,omitempty"`
	PortName string `json:"portName,omitempty"`
	// Weight among the rule's backends (default 1).
	Weight *int32 `json:"weight,omitempty"`
}

// RouteTLS names the Certificate (its Secret) that covers the hostnames.
type RouteTLS struct {
	Certificate string `json:"certificate"`
}

// RouteStatus reports each hostname as Gateway API reports a parent.
type RouteStatus struct {
	lifecycle.Status `json:",inline"`
	// Hostnames: conditions Accepted and ResolvedRefs per hostname.
	Hostnames []RouteHostnameStatus `json:"hostnames,omitempty"`
}

// RouteHostnameStatus is one hostname's conditions.
type RouteHostnameStatus struct {
	Hostname   string             `json:"hostname"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RouteList is a list of Routes.
// +kubebuilder:object:root=true
type RouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Route `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Route) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Route) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
