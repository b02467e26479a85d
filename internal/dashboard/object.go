package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"kubeos.dev/kube/internal/ctl"
	"kubeos.dev/kube/internal/ctl/opsapi"
)

type objectData struct {
	Kind, Resource, Namespace, Name string
	UID, Phase, PhaseClass, Age     string
	Labels, Annotations             []kv
	Finalizers                      []string
	Conditions                      []condRow
	Spec, Status                    string
	// Why is the `kube ctl why` answer: the path to the deepest object not Ready.
	Why          []treeLine
	Blocker      *treeLine
	BlockerNote  string
	Dependencies graphView
	Dependents   graphView
	Events       []eventRow
	EventsNote   string
	Audit        []auditRow
	AuditNote    string
	Stuck        *stuckView
	Actions      []actionView
	KindLink     string
}

type kv struct{ Key, Value string }

type condRow struct {
	Type, Status, Reason, Message, Age, Class string
}

type graphView struct {
	Lines  []treeLine
	Hidden int
	Error  string
}

// treeLine is one object of a dependency tree.
type treeLine struct {
	Indent                         int
	Prefix                         string
	ID, Kind, Label, Link          string
	Ready, Phase, Reason, Message  string
	Class                          string
	Note                           string
	Missing, Hidden, Blocker, Root bool
}

type eventRow struct{ Age, Type, Reason, Note, From string }

type auditRow struct{ Time, User, Verb, Code, Object, Lifecycle string }

type stuckView struct {
	Since      string
	Finalizers []kv
	Engine     string
	Stalled    string
	Dependents []treeLine
	Timeout    string
	LastError  string
	Audit      []auditRow
	AuditNote  string
}

func (d *Dashboard) objectPage(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r.Context())
	ctx := r.Context()
	resource, name := r.PathValue("resource"), r.PathValue("name")
	ns := r.PathValue("namespace")
	if ns == "-" {
		ns = ""
	}
	k, _, err := d.kindOf(ctx, u, resource, ns)
	if err != nil {
		d.kindError(w, r, u, err)
		return
	}
	if k.Namespaced != (ns != "") {
		d.fail(w, r, u, http.StatusNotFound, "Not found", fmt.Sprintf("%s is %s", k.Kind, map[bool]string{true: "namespaced", false: "cluster-scoped"}[k.Namespaced]))
		return
	}
	dc, err := u.dynamic()
	if err != nil {
		d.apiError(w, r, u, err)
		return
	}
	ri := dc.Resource(k.GVR)
	var obj *unstructured.Unstructured
	if ns != "" {
		obj, err = ri.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		obj, err = ri.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		d.apiError(w, r, u, err)
		return
	}
	now := d.o.Now()
	row := rowOf(obj)
	ct := obj.GetCreationTimestamp()
	data := objectData{Kind: k.Kind, Resource: k.Resource, Namespace: ns, Name: name, UID: string(obj.GetUID()),
		Phase: row.Phase, PhaseClass: phaseClass(row.Phase), Age: ctl.Age(&ct, now), Finalizers: obj.GetFinalizers(),
		KindLink: kindURL(k.Resource, ns)}
	if data.Phase == "" {
		data.Phase, data.PhaseClass = "Pending", phaseClass("Pending")
	}
	data.Labels, data.Annotations = sortedKV(obj.GetLabels()), sortedKV(obj.GetAnnotations())
	for _, c := range row.Conditions {
		cv := condViews([]metav1.Condition{c})[0]
		data.Conditions = append(data.Conditions, condRow{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			Age: ctl.Age(&c.LastTransitionTime, now), Class: cv.Class})
	}
	if spec, ok := obj.Object["spec"]; ok {
		data.Spec = toYAML(spec)
	}
	if st, ok := obj.Object["status"]; ok {
		data.Status = toYAML(st)
	}

	deps, depErr := u.graph(ctx, k.Kind, ns, name, opsapi.DirectionDependencies)
	dependents, dtErr := u.graph(ctx, k.Kind, ns, name, opsapi.DirectionDependents)
	if apierrors.IsUnauthorized(depErr) || apierrors.IsUnauthorized(dtErr) {
		d.apiError(w, r, u, depErr)
		return
	}
	blockerID := ""
	if depErr == nil && obj.GetDeletionTimestamp() == nil { // a deleting object gets why-stuck instead
		path := ctl.Blame(deps)
		if len(path) > 0 && (len(path) > 1 || notReady(path[0])) {
			blockerID = path[len(path)-1].ID
			for i, n := range path {
				l := lineOf(n, ns, now)
				l.Indent = i
				data.Why = append(data.Why, l)
			}
			b := data.Why[len(data.Why)-1]
			b.Blocker = true
			data.Blocker = &b
			switch {
			case b.Missing:
				data.BlockerNote = "It does not exist: create it or remove the reference to it."
			case b.Hidden:
				data.BlockerNote = "You may not read it: ask someone who can."
			case len(path) == 1:
				data.BlockerNote = "Its own dependencies are Ready: the object itself is not."
			}
			if n := path[len(path)-1]; !n.Hidden && !n.Missing {
				if n.LastError != "" {
					data.BlockerNote = strings.TrimSpace(data.BlockerNote + " Last reconcile error: " + n.LastError)
				}
				if n.NextAttempt != nil {
					data.BlockerNote = strings.TrimSpace(data.BlockerNote + " Next attempt: " + n.NextAttempt.UTC().Format(time.RFC3339) + ".")
				}
			}
		}
	}
	data.Dependencies = graphViewOf(deps, depErr, ns, blockerID, now)
	data.Dependents = graphViewOf(dependents, dtErr, ns, "", now)

	data.Events, data.EventsNote = d.events(ctx, u, ns, string(obj.GetUID()), now)
	auditNS := ns
	al, aerr := u.auditOf(ctx, auditNS, string(obj.GetUID()), time.Time{}, 100)
	data.Audit, data.AuditNote = auditRows(al, aerr, false)

	if ts := obj.GetDeletionTimestamp(); ts != nil {
		data.Stuck = d.whyStuck(ctx, u, k, obj, dependents, dtErr, auditNS, now)
	}
	data.Actions = d.actions(ctx, u, k, ns, name, obj)
	p := d.basePage(u, k.Kind+" "+name, streamURL("object", k.Resource, ns, name))
	p.Flash = doneMessages[r.URL.Query().Get("done")]
	p.Content = data
	d.render(w, r, http.StatusOK, "object", p)
}

func notReady(n opsapi.Node) bool {
	ready, phase, _, _ := ctl.Status(n)
	return n.Hidden || n.Missing || ready != "True" || phase != "Active"
}

func sortedKV(m map[string]string) []kv {
	var out []kv
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(cannot render: %v)", err)
	}
	return string(b)
}

// lineOf describes one graph node for the page.
func lineOf(n opsapi.Node, rootNS string, now time.Time) treeLine {
	ready, phase, reason, msg := ctl.Status(n)
	l := treeLine{ID: n.ID, Kind: n.Kind, Ready: ready, Phase: phase, Reason: reason, Message: msg,
		Class: phaseClass(phase), Missing: n.Missing, Hidden: n.Hidden}
	switch {
	case n.Hidden:
		l.Label = "(hidden)"
		if n.Namespace != "" {
			l.Label = "(hidden, in namespace " + n.Namespace + ")"
		}
		l.Class = "ph-hidden"
	case n.Namespace != "" && n.Namespace != rootNS:
		l.Label = n.Namespace + "/" + n.Name
	default:
		l.Label = n.Name
	}
	if n.Missing {
		l.Class = "ph-missing"
	}
	if !n.Hidden && !n.Missing && n.Resource != "" {
		l.Link = objectURL(n.Resource, n.Namespace, n.Name)
	}
	return l
}

// graphViewOf lays a walk out as a tree (ctl.Tree: each object once, later meetings as
// back-references, cycles marked), the blocker highlighted.
func graphViewOf(g *opsapi.Graph, err error, rootNS, blocker string, now time.Time) graphView {
	if err != nil {
		if apierrors.IsForbidden(err) {
			return graphView{Error: "hidden: " + err.Error()}
		}
		return graphView{Error: err.Error()}
	}
	v := graphView{Hidden: g.Hidden}
	for _, tr := range ctl.Tree(g) {
		l := lineOf(tr.Node, rootNS, now)
		l.Prefix, l.Note = tr.Prefix, tr.Note
		l.Root = tr.Node.ID == g.Root && tr.Prefix == ""
		l.Blocker = blocker != "" && tr.Node.ID == blocker && !l.Root
		switch tr.Note {
		case "cycle":
			l.Class += " cycle"
		case "back-reference":
			l.Class += " backref"
		}
		v.Lines = append(v.Lines, l)
	}
	return v
}

// events are the newest Events about uid (events.k8s.io/v1 in the object's namespace, or
// default for a cluster-scoped object), read as the user.
func (d *Dashboard) events(ctx context.Context, u *user, ns, uid string, now time.Time) ([]eventRow, string) {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	cs, err := u.clientset()
	if err != nil {
		return nil, err.Error()
	}
	l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, "hidden: you may not list events in namespace " + ns
	}
	if err != nil {
		return nil, err.Error()
	}
	var mine []eventsv1.Event
	for _, ev := range l.Items {
		if string(ev.Regarding.UID) == uid {
			mine = append(mine, ev)
		}
	}
	slices.SortFunc(mine, func(a, b eventsv1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	if len(mine) > 20 {
		mine = mine[:20]
	}
	var out []eventRow
	for _, ev := range mine {
		from := ev.ReportingController
		if from == "" {
			from = ev.DeprecatedSource.Component
		}
		out = append(out, eventRow{Age: duration.HumanDuration(now.Sub(eventTime(ev))), Type: ev.Type, Reason: ev.Reason, Note: ev.Note, From: from})
	}
	if len(out) == 0 {
		return nil, "none"
	}
	return out, ""
}

func eventTime(ev eventsv1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case ev.Series != nil:
		return ev.Series.LastObservedTime.Time
	case !ev.DeprecatedLastTimestamp.IsZero():
		return ev.DeprecatedLastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

// auditRows renders audit entries, newest first; writesOnly drops reads (tools polling).
func auditRows(l *opsapi.AuditList, err error, writesOnly bool) ([]auditRow, string) {
	switch {
	case apierrors.IsServiceUnavailable(err):
		return nil, "unavailable: " + err.Error()
	case apierrors.IsForbidden(err):
		return nil, "hidden: you may not read the audit log here"
	case err != nil:
		return nil, err.Error()
	}
	var out []auditRow
	for i := len(l.Items) - 1; i >= 0; i-- {
		ev := l.Items[i]
		if writesOnly && (ev.Verb == "get" || ev.Verb == "list" || ev.Verb == "watch") {
			continue
		}
		a := auditRow{Time: ev.StageTimestamp.UTC().Format("2006-01-02 15:04:05Z"), User: ev.User.Username, Verb: ev.Verb}
		if ev.ImpersonatedUser != nil {
			a.User += " as " + ev.ImpersonatedUser.Username
		}
		if ev.ResponseStatus != nil {
			a.Code = fmt.Sprint(ev.ResponseStatus.Code)
		}
		if ref := ev.ObjectRef; ref != nil {
			a.Object = ref.Resource
			if ref.Subresource != "" {
				a.Object += "/" + ref.Subresource
			}
		}
		var lc []string
		for k, v := range ev.Annotations {
			if strings.HasPrefix(k, "lifecycle.kubeos.dev/") {
				lc = append(lc, strings.TrimPrefix(k, "lifecycle.kubeos.dev/")+"="+v)
			}
		}
		slices.Sort(lc)
		a.Lifecycle = strings.Join(lc, " ")
		out = append(out, a)
	}
	note := ""
	if len(out) == 0 {
		note = "none"
	}
	if l.Hidden > 0 {
		note = strings.TrimSpace(note + fmt.Sprintf(" (%d entries hidden: you may not read their objects)", l.Hidden))
	}
	if l.Truncated {
		note = strings.TrimSpace(note + " (older entries not shown)")
	}
	return out, note
}

// whyStuck is `kube ctl why-stuck`'s answer for a deleting object.
func (d *Dashboard) whyStuck(ctx context.Context, u *user, k *kindInfo, obj *unstructured.Unstructured, dependents *opsapi.Graph, dtErr error, ns string, now time.Time) *stuckView {
	ts := obj.GetDeletionTimestamp()
	s := &stuckView{Since: duration.HumanDuration(now.Sub(ts.Time)) + " ago (" + ts.UTC().Format(time.RFC3339) + ")"}
	owners := ctl.FinalizerOwners(k.Kind, obj.GetFinalizers(), obj.GetManagedFields())
	for _, f := range obj.GetFinalizers() {
		s.Finalizers = append(s.Finalizers, kv{f, owners[f]})
	}
	for _, c := range rowOf(obj).Conditions {
		if c.Type == "Terminating" && c.Message != "" {
			s.Engine = c.Reason + ": " + c.Message
		}
		if c.Type == "Stalled" && c.Status == metav1.ConditionTrue {
			s.Stalled = c.Reason + ": " + c.Message
		}
	}
	if dtErr == nil {
		byID := map[string]opsapi.Node{}
		var root opsapi.Node
		for _, n := range dependents.Nodes {
			byID[n.ID] = n
			if n.ID == dependents.Root {
				root = n
			}
		}
		for _, id := range root.Edges {
			if n := byID[id]; !n.Missing {
				s.Dependents = append(s.Dependents, lineOf(n, obj.GetNamespace(), now))
			}
		}
		if root.DeletionTimeoutSeconds > 0 {
			to := time.Duration(root.DeletionTimeoutSeconds * float64(time.Second))
			left := ts.Add(to).Sub(now)
			if left > 0 {
				s.Timeout = fmt.Sprintf("%s left (the kind's timeout is %s; then the object is marked Stalled)", left.Round(time.Second), to)
			} else {
				s.Timeout = fmt.Sprintf("passed %s ago (timeout %s): the object is Stalled and still retried", (-left).Round(time.Second), to)
			}
		}
		s.LastError = root.LastError
	}
	al, err := u.auditOf(ctx, ns, string(obj.GetUID()), ts.Time, 100)
	s.Audit, s.AuditNote = auditRows(al, err, true)
	return s
}
