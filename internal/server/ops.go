package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/apiserver/discovery"
	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
	restapi "kubeos.dev/kube/internal/apiserver/rest"
	"kubeos.dev/kube/internal/audit"
	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// OpsViewRole is the ClusterRole, aggregated to view, edit and admin, that lets a user read
// the ops API's virtual resources; what each answer shows is then limited by the user's rights
// on the objects it is about (internal/ctl/opsapi).
const OpsViewRole = "kubeos:ops-view"

// opsHandlers registers the read APIs behind operator tooling (`kube ctl`, issue 18): the
// audit query and the lifecycle health aggregates. Every request passes the filter chain
// (authentication, flow control, authorization, audit) like any other.
func (s *Server) opsHandlers(mux *http.ServeMux) {
	mux.Handle("/apis/"+opsapi.Group, http.HandlerFunc(s.serveOps))
	mux.Handle("/apis/"+opsapi.Group+"/", http.HandlerFunc(s.serveOps))
}

// opsResources are the ops API's resources as discovery lists them: each is served in a
// namespace and across all of them, read-only.
var opsResources = []metav1.APIResource{
	{Name: opsapi.ResourceHealths, SingularName: "health", Namespaced: true, Kind: "Health", Verbs: metav1.Verbs{"list"}},
	{Name: opsapi.ResourceGraphs, SingularName: "graph", Namespaced: true, Kind: "Graph", Verbs: metav1.Verbs{"get"}},
	{Name: opsapi.ResourceAuditEvents, SingularName: "auditevent", Namespaced: true, Kind: "AuditEvent", Verbs: metav1.Verbs{"list"}},
	{Name: opsapi.ResourceObjects, SingularName: "object", Namespaced: true, Kind: "ObjectRow", Verbs: metav1.Verbs{"list"}},
}

// opsDiscovery lists the ops API in discovery (legacy and aggregated) after the extension
// API servers' groups: it is served by serveOps, not by the type registry.
type opsDiscovery struct{ discovery.Remote }

func (o opsDiscovery) Available() []discovery.RemoteVersion {
	return append(o.Remote.Available(), discovery.RemoteVersion{
		GroupVersion: schema.GroupVersion{Group: opsapi.Group, Version: opsapi.Version}, Resources: opsResources})
}

// serveOpsDiscovery answers GET /apis/ops.kubeos.dev and /apis/ops.kubeos.dev/v1alpha1.
func serveOpsDiscovery(w http.ResponseWriter, r *http.Request) bool {
	gv := opsapi.Group + "/" + opsapi.Version
	var out any
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/apis/" + opsapi.Group:
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: opsapi.Version}
		out = &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: opsapi.Group,
			Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
	case "/apis/" + gv:
		out = &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv,
			APIResources: opsResources}
	default:
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		restapi.WriteStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: opsapi.Group}, strings.ToLower(r.Method)))
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
	return true
}

// ensureOpsRole creates or updates OpsViewRole.
func (s *Server) ensureOpsRole(ctx context.Context) error {
	cfg, err := s.LoopbackConfig(ControllerUser("lifecycle"), ControllersGroup, "system:masters")
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s.lifecycle.scheme})
	if err != nil {
		return err
	}
	want := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: OpsViewRole, Labels: map[string]string{
		"rbac.authorization.k8s.io/aggregate-to-view": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true",
		"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{opsapi.Group},
			Resources: []string{opsapi.ResourceHealths, opsapi.ResourceGraphs, opsapi.ResourceAuditEvents, opsapi.ResourceObjects}, Verbs: []string{"get", "list"}}}}
	return ensureClusterRole(ctx, c, want, 200*time.Millisecond)
}

// opsKind is a lifecycle-managed kind as the API serves it.
type opsKind struct {
	kind, resource string
	namespaced     bool
}

var (
	opsKindsOnce sync.Once
	opsKindsMap  map[string]opsKind
)

// opsKinds maps kind names to their resources (from the kubeos.dev CRDs).
func opsKinds() map[string]opsKind {
	opsKindsOnce.Do(func() {
		opsKindsMap = map[string]opsKind{}
		for _, crd := range v1alpha1.CRDs(nil) {
			opsKindsMap[crd.Spec.Names.Kind] = opsKind{kind: crd.Spec.Names.Kind, resource: crd.Spec.Names.Plural,
				namespaced: crd.Spec.Scope == "Namespaced"}
		}
	})
	return opsKindsMap
}

func (s *Server) serveOps(w http.ResponseWriter, r *http.Request) {
	info, _ := request.InfoFrom(r.Context())
	u, _ := request.UserFrom(r.Context())
	if info != nil && !info.IsResourceRequest && serveOpsDiscovery(w, r) {
		return
	}
	if info == nil || u == nil || !info.IsResourceRequest || info.APIVersion != opsapi.Version {
		restapi.WriteStatus(w, notFound(r.URL.Path))
		return
	}
	if info.Verb != "get" && info.Verb != "list" {
		restapi.WriteStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: opsapi.Group, Resource: info.Resource}, info.Verb))
		return
	}
	a := &opsAuthz{s: s, ctx: r.Context(), u: u, ua: r.UserAgent(), impersonator: info.Impersonator}
	var (
		out any
		err *apierrors.StatusError
	)
	switch {
	case info.Resource == opsapi.ResourceHealths && info.Name == "" && info.Subresource == "":
		out, err = s.opsHealth(a, info.Namespace, r.URL.Query().Get("kind"))
	case info.Resource == opsapi.ResourceGraphs && info.Name != "" && info.Subresource == "":
		out, err = s.opsGraph(a, info.Namespace, info.Name, r.URL.Query())
	case info.Resource == opsapi.ResourceAuditEvents && info.Name == "" && info.Subresource == "":
		out, err = s.opsAudit(a, info.Namespace, r.URL.Query())
	case info.Resource == opsapi.ResourceObjects && info.Name == "" && info.Subresource == "":
		out, err = s.opsObjects(r.Context(), a, info.Namespace, r.URL.Query())
	default:
		err = notFound(r.URL.Path)
	}
	if err != nil {
		restapi.WriteStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// opsAuthz asks the server's authorizer (RBAC, Node, AccessPolicy) whether the requesting
// user may read something, as if they asked for it directly.
type opsAuthz struct {
	s            *Server
	ctx          context.Context
	u            *request.User
	ua           string
	impersonator string
	memo         map[[5]string]bool
}

func (a *opsAuthz) allowed(verb, group, resource, namespace, name string) bool {
	info := request.Info{IsResourceRequest: true, Verb: verb, APIPrefix: "apis", APIGroup: group, APIVersion: "v1alpha1",
		Namespace: namespace, Resource: resource, Name: name, UserAgent: a.ua, Impersonator: a.impersonator}
	if group == "" {
		info.APIPrefix, info.APIVersion = "api", "v1"
	}
	key := [5]string{verb, group, resource, namespace, name}
	if ok, seen := a.memo[key]; seen {
		return ok
	}
	ok, _ := filters.Allowed(a.ctx, a.s.lifecycle.authz, a.u, &info)
	if a.memo == nil {
		a.memo = map[[5]string]bool{}
	}
	a.memo[key] = ok
	return ok
}

func (s *Server) opsHealth(a *opsAuthz, namespace, kindFilter string) (*opsapi.HealthList, *apierrors.StatusError) {
	e := s.lifecycle.engine
	list := &opsapi.HealthList{TypeMeta: opsTypeMeta("HealthList"), Namespace: namespace}
	kinds := opsKinds()
	matched := false
	for _, k := range e.Kinds() {
		meta, ok := kinds[k]
		if !ok || (kindFilter != "" && !matchKind(kindFilter, meta)) {
			continue
		}
		matched = true
		if namespace != "" && !meta.namespaced {
			continue
		}
		if !a.allowed("list", v1alpha1.Group, meta.resource, namespace, "") {
			where := "at the cluster scope"
			if namespace != "" {
				where = "in namespace " + namespace
			}
			list.Hidden = append(list.Hidden, opsapi.HiddenKind{Kind: k, Reason: fmt.Sprintf("may not list %s.%s %s", meta.resource, v1alpha1.Group, where)})
			continue
		}
		h := e.Health(k, namespace, namespace == "")
		kh := opsapi.KindHealth{Kind: k, Resource: meta.resource, Namespaced: meta.namespaced, Total: h.Total,
			Phases: map[string]int{}, Stalled: h.Stalled, Failed: h.Phases[lifecycle.PhaseFailed],
			Reconciles: h.Reconciles, Errors: h.Errors, ReconcileP99Seconds: h.P99.Seconds()}
		for p, n := range h.Phases {
			kh.Phases[string(p)] = n
		}
		if h.OldestReconciling != nil {
			kh.OldestReconciling = h.OldestReconciling.String()
			t := metav1.NewTime(h.ReconcilingSince)
			kh.ReconcilingSince = &t
		}
		list.Items = append(list.Items, kh)
	}
	if kindFilter != "" && !matched {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.Group, Resource: "kinds"}, kindFilter)
	}
	bus := s.opts.EventBus
	if bus == "" {
		bus = "memory"
	}
	list.EventBus = opsapi.BusState{Backend: bus, Healthy: true}
	if err := s.lifecycle.bus.Healthy(); err != nil {
		list.EventBus.Healthy, list.EventBus.Error = false, err.Error()
	}
	return list, nil
}

// queryValue is a query parameter's first value ("" when absent).
func queryValue(q map[string][]string, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// queryKind is the lifecycle-managed kind a ?kind= names, or a 400 saying it is none.
func queryKind(want string) (opsKind, *apierrors.StatusError) {
	for _, k := range opsKinds() {
		if matchKind(want, k) {
			return k, nil
		}
	}
	return opsKind{}, apierrors.NewBadRequest(fmt.Sprintf("kind %q is not a lifecycle-managed kind", want))
}

func matchKind(want string, k opsKind) bool {
	want = strings.TrimSuffix(strings.ToLower(want), "."+v1alpha1.Group)
	return want == strings.ToLower(k.kind) || want == k.resource || want+"s" == k.resource
}

// opsGraph walks the dependency graph from one object: ?kind=K (required),
// direction=dependencies|dependents, depth=N (0: no limit).
func (s *Server) opsGraph(a *opsAuthz, namespace, name string, q map[string][]string) (*opsapi.Graph, *apierrors.StatusError) {
	get := func(k string) string { return queryValue(q, k) }
	meta, serr := queryKind(get("kind"))
	if serr != nil {
		return nil, serr
	}
	if meta.namespaced != (namespace != "") {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s is %s", meta.kind, map[bool]string{true: "namespaced", false: "cluster-scoped"}[meta.namespaced]))
	}
	dir := get("direction")
	if dir == "" {
		dir = opsapi.DirectionDependencies
	}
	if dir != opsapi.DirectionDependencies && dir != opsapi.DirectionDependents {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("direction %q: want %s or %s", dir, opsapi.DirectionDependencies, opsapi.DirectionDependents))
	}
	depth := 0
	if d := get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("depth %q: want a non-negative integer", d))
		}
		depth = n
	}
	gr := schema.GroupResource{Group: v1alpha1.Group, Resource: meta.resource}
	if !a.allowed("get", v1alpha1.Group, meta.resource, namespace, name) {
		return nil, apierrors.NewForbidden(gr, name, fmt.Errorf("user %q cannot get resource %q in API group %q%s",
			a.u.Name, meta.resource, v1alpha1.Group, map[bool]string{true: " in the namespace \"" + namespace + "\"", false: " at the cluster scope"}[namespace != ""]))
	}
	root := lifecycle.Ref{Kind: meta.kind, Namespace: namespace, Name: name}
	e := s.lifecycle.engine
	if _, ok := e.State(root); !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	g := &opsapi.Graph{TypeMeta: opsTypeMeta("Graph"), Root: root.String(), Direction: dir, Depth: depth}
	next := e.Graph().Dependencies
	if dir == opsapi.DirectionDependents {
		next = e.Graph().Dependents
	}
	kinds := opsKinds()
	type item struct {
		ref   lifecycle.Ref
		level int
	}
	seen := map[lifecycle.Ref]bool{root: true}
	queue := []item{{root, 0}}
	for i := 0; i < len(queue); i++ {
		it := queue[i]
		km, known := kinds[it.ref.Kind]
		if it.ref != root && (!known || !a.allowed("get", v1alpha1.Group, km.resource, it.ref.Namespace, it.ref.Name)) {
			g.Hidden++
			g.Nodes = append(g.Nodes, opsapi.Node{ID: "hidden-" + strconv.Itoa(g.Hidden), Kind: it.ref.Kind, Namespace: it.ref.Namespace, Hidden: true})
			continue
		}
		n := opsNode(e, it.ref, km.resource)
		for _, d := range next(it.ref) {
			if depth > 0 && it.level >= depth {
				n.Truncated = true
				break
			}
			n.Edges = append(n.Edges, d.String())
			if !seen[d] {
				seen[d] = true
				queue = append(queue, item{d, it.level + 1})
			}
		}
		g.Nodes = append(g.Nodes, n)
	}
	// Edges to hidden nodes point at their placeholders.
	hiddenID := map[string]string{}
	for i, it := range queue {
		if g.Nodes[i].Hidden {
			hiddenID[it.ref.String()] = g.Nodes[i].ID
		}
	}
	for i := range g.Nodes {
		for j, id := range g.Nodes[i].Edges {
			if h, ok := hiddenID[id]; ok {
				g.Nodes[i].Edges[j] = h
			}
		}
	}
	return g, nil
}

// opsNode describes ref from the engine's informer copy.
func opsNode(e *lifecycle.Engine, ref lifecycle.Ref, resource string) opsapi.Node {
	n := opsapi.Node{ID: ref.String(), Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, Resource: resource,
		DeletionTimeoutSeconds: e.DeletionTimeout(ref.Kind).Seconds()}
	st, ok := e.State(ref)
	if !ok {
		n.Missing = true
		return n
	}
	o := st.Object
	ls := o.LifecycleStatus()
	n.UID, n.Phase, n.Finalizers = string(o.GetUID()), string(st.Phase), o.GetFinalizers()
	n.Conditions = ls.Conditions
	ct := o.GetCreationTimestamp()
	n.CreationTimestamp = &ct
	n.DeletionTimestamp = o.GetDeletionTimestamp()
	n.LastError = st.LastError
	if !st.LastReconcile.IsZero() {
		t := metav1.NewTime(st.LastReconcile)
		n.LastReconcile = &t
	}
	if !st.NextAttempt.IsZero() {
		t := metav1.NewTime(st.NextAttempt)
		n.NextAttempt = &t
	}
	return n
}

// opsAudit queries the audit log: ?uid, operator, phase, user, since (RFC 3339), limit. An
// entry is shown when the user may get its object (its resource, in its namespace, by name);
// entries about no object, or all of them, need list auditevents at the cluster scope.
func (s *Server) opsAudit(a *opsAuthz, namespace string, q map[string][]string) (*opsapi.AuditList, *apierrors.StatusError) {
	get := func(k string) string { return queryValue(q, k) }
	path := s.opts.AuditLogPath
	if path == "" || path == "-" {
		return nil, apierrors.NewServiceUnavailable("the audit log is not readable: kube server writes none (--audit-policy-file, --audit-log-path) or writes it to standard output")
	}
	query := audit.Query{UID: get("uid"), Operator: get("operator"), Phase: get("phase"), User: get("user"), Namespace: namespace}
	if v := get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("since %q: want an RFC 3339 time", v))
		}
		query.Since = t
	}
	limit := 500
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("limit %q: want a positive integer", v))
		}
		limit = n
	}
	all := a.allowed("list", opsapi.Group, opsapi.ResourceAuditEvents, "", "")
	allow := func(ev *auditv1.Event) bool {
		if all {
			return true
		}
		r := ev.ObjectRef
		if r == nil || r.Resource == "" {
			return false
		}
		return a.allowed("get", r.APIGroup, r.Resource, r.Namespace, r.Name)
	}
	files, err := audit.Files(path)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	items, hidden, truncated, err := audit.Search(files, query, allow, limit)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].StageTimestamp.Before(&items[j].StageTimestamp) })
	if items == nil {
		items = []auditv1.Event{}
	}
	return &opsapi.AuditList{TypeMeta: opsTypeMeta("AuditList"), Items: items, Hidden: hidden, Truncated: truncated}, nil
}

func opsTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: opsapi.Group + "/" + opsapi.Version}
}
