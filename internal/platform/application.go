package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerApplication registers the Application kind. Its Members (lifecycle.Contains) are
// its Components (spec.components, and the selector's matches recorded in
// status.components), so the engine holds it until they are Active and tree shows them,
// and its deletion outlives theirs: their finalizers do not wait for it, it waits for them
// (application_teardown.go deletes them in dependency order). While it is held the driver
// does not run: the watch of Components refreshes the member labels and the status table
// itself (applicationDriver.refresh), so status.components says which Component is not
// ready and why also then. The refresh is incremental: a Component event whose row of the
// table is the one last written costs nothing, and the others read the informer cache
// (Options.Cache), not the API; the events of one spell (appRefreshDelay) make one write
// and one pass of the Application. The Components' events may all have come before the engine
// first saw the Application (they are created first and held at once): an Application
// whose table lacks one of its named members is refreshed when the engine lists its
// members (applicationDriver.tableMissing), else it would stay without a table until a
// member changed.
func registerApplication(e *lifecycle.Engine, o Options) error {
	d := &applicationDriver{o: o, apps: map[string]map[string]appMembership{},
		rows: map[types.NamespacedName]map[string]v1alpha1.ApplicationComponentStatus{}, latest: map[types.NamespacedName]*v1alpha1.Component{},
		refreshing: map[types.NamespacedName]bool{}, due: map[types.NamespacedName]bool{}}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Application]{Kind: "Application", New: func() *v1alpha1.Application { return &v1alpha1.Application{} },
		Driver: d, MaxConcurrentReconciles: 4, Thrash: busyThrashGuard(),
		Members: func(app *v1alpha1.Application) []lifecycle.Ref {
			d.remember(app)
			if app.DeletionTimestamp == nil && d.tableMissing(app) {
				go d.refreshTable(types.NamespacedName{Namespace: app.Namespace, Name: app.Name})
			}
			names := appListed(app)
			refs := make([]lifecycle.Ref, len(names))
			for i, n := range names {
				refs[i] = lifecycle.Ref{Kind: "Component", Namespace: app.Namespace, Name: n}
			}
			return refs
		},
		Watches: []lifecycle.Watch{{Object: &v1alpha1.Component{}, Map: d.mapComponent, Delay: appRefreshDelay}}})
}

// appListed is spec.components ∪ the members recorded in status, sorted.
func appListed(app *v1alpha1.Application) []string {
	names := slices.Clone(app.Spec.Components)
	for _, r := range app.Status.Components {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

type appMembership struct {
	names    []string
	selector labels.Selector // nil: none
}

func (m appMembership) claims(c *v1alpha1.Component) bool {
	return slices.Contains(m.names, c.Name) || (m.selector != nil && m.selector.Matches(labels.Set(c.Labels)))
}

type applicationDriver struct {
	o    Options
	mu   sync.Mutex
	apps map[string]map[string]appMembership // namespace → Application → membership
	// rows are the table last computed per Application, by member name: a Component event
	// that leaves its row as it is writes nothing.
	rows map[types.NamespacedName]map[string]v1alpha1.ApplicationComponentStatus
	// latest is the newest Component the watch delivered, by namespace/name: newer than
	// or as new as the cache's copy (the two informers are distinct), so a table is never
	// built from an older version of a member than one an earlier table was.
	latest map[types.NamespacedName]*v1alpha1.Component
	// refreshing are the Applications a refreshTable runs for.
	refreshing map[types.NamespacedName]bool
	// due are the Applications whose table a member's event asked to write (refresh).
	due map[types.NamespacedName]bool
	// writing holds a *sync.Mutex per Application (write).
	writing sync.Map
}

// tableMissing reports whether the table last computed for app lacks one of the members
// it names (none computed yet: the driver started, or its Components' events came first),
// and no refresh of it is under way.
func (d *applicationDriver) tableMissing(app *v1alpha1.Application) bool {
	n := types.NamespacedName{Namespace: app.Namespace, Name: app.Name}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refreshing[n] {
		return false
	}
	rows, ok := d.rows[n]
	missing := !ok
	for _, name := range app.Spec.Components {
		if _, has := rows[name]; !has {
			missing = true
		}
	}
	if missing {
		d.refreshing[n] = true
	}
	return missing
}

// refreshTable writes the table of the Application n (tableMissing), reading the API, not
// the cache: the Components' last events came before the Application was known, and the
// cache may not have them yet (a table written from a Component's first version, before the
// engine held it, stayed "Pending" with no message: CI, 12-07).
func (d *applicationDriver) refreshTable(n types.NamespacedName) {
	defer func() {
		d.mu.Lock()
		delete(d.refreshing, n)
		d.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.write(ctx, n, d.o.Client); err != nil {
		d.o.Log.Debug("application table", "application", n.String(), "err", err)
	}
}

func (d *applicationDriver) remember(app *v1alpha1.Application) {
	m := appMembership{names: slices.Clone(app.Spec.Components)}
	if app.Spec.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(app.Spec.Selector); err == nil && !s.Empty() {
			m.selector = s
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.apps[app.Namespace] == nil {
		d.apps[app.Namespace] = map[string]appMembership{}
	}
	d.apps[app.Namespace][app.Name] = m
}

func (d *applicationDriver) forget(app *v1alpha1.Application) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.apps[app.Namespace], app.Name)
	delete(d.rows, types.NamespacedName{Namespace: app.Namespace, Name: app.Name})
	d.writing.Delete(types.NamespacedName{Namespace: app.Namespace, Name: app.Name})
}

// unchanged reports whether row is the one last computed for the Application n.
func (d *applicationDriver) unchanged(n types.NamespacedName, row v1alpha1.ApplicationComponentStatus) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, ok := d.rows[n][row.Name]
	return ok && prev == row
}

// setRows records the table computed for the Application n.
func (d *applicationDriver) setRows(n types.NamespacedName, rows []v1alpha1.ApplicationComponentStatus) {
	m := make(map[string]v1alpha1.ApplicationComponentStatus, len(rows))
	for _, r := range rows {
		m[r.Name] = r
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rows[n] = m
}

// mapComponent maps a Component to the Applications claiming it, and refreshes their
// labels and table (the engine does not run the driver while a member is not Active).
func (d *applicationDriver) mapComponent(ctx context.Context, obj client.Object) []types.NamespacedName {
	c, ok := obj.(*v1alpha1.Component)
	if !ok {
		return nil
	}
	var out []types.NamespacedName
	d.mu.Lock()
	for name, m := range d.apps[c.Namespace] {
		if m.claims(c) || c.Labels[labelApplicationKey] == name {
			out = append(out, types.NamespacedName{Namespace: c.Namespace, Name: name})
		}
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if len(out) > 0 && (c.DeletionTimestamp == nil || len(c.Finalizers) > 0) {
		d.latest[key] = c
	} else {
		delete(d.latest, key) // no Application's, or its last event
	}
	d.mu.Unlock()
	for _, n := range out {
		d.refresh(ctx, n, c)
	}
	return out
}

// appRefreshDelay is how long after a member's event an Application's table is written
// (and its pass runs: the Watch's Delay): the events of members that change one after
// another in that spell make one status write, not one each.
const appRefreshDelay = 500 * time.Millisecond

// refresh labels the members and writes the table of a held Application (status patch of
// status.ready and status.components only) appRefreshDelay after an event of its member c:
// nothing when c's row is the one last computed and c has the Application's labels. The
// write reads the members then, so one write covers every event of the spell.
func (d *applicationDriver) refresh(ctx context.Context, n types.NamespacedName, c *v1alpha1.Component) {
	if d.unchanged(n, componentRow(member{name: c.Name, comp: c})) && c.Labels[labelApplicationKey] == n.Name && c.Labels[labelPartOf] == n.Name {
		return
	}
	d.mu.Lock()
	due := d.due[n]
	d.due[n] = true
	d.mu.Unlock()
	if due {
		return // a write is due already
	}
	time.AfterFunc(appRefreshDelay, func() {
		d.mu.Lock()
		delete(d.due, n) // an event from now on makes another write
		d.mu.Unlock()
		if ctx.Err() != nil {
			return // the engine stopped
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := d.write(wctx, n, d.o.cached()); err != nil {
			d.o.Log.Debug("application refresh", "application", n.String(), "err", err)
		}
	})
}

// write labels the members of the Application n and writes its table when it differs from
// status (a status patch of status.ready and status.components only), reading through r.
// The writes of one Application are serialized, so that a table computed from older reads
// never lands after a newer one.
func (d *applicationDriver) write(ctx context.Context, n types.NamespacedName, r client.Reader) error {
	mu, _ := d.writing.LoadOrStore(n, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	var app v1alpha1.Application
	if err := r.Get(ctx, n, &app); apierrors.IsNotFound(err) {
		err = d.o.Client.Get(ctx, n, &app) // created since the cache's last event
		if err != nil {
			return client.IgnoreNotFound(err)
		}
	} else if err != nil {
		return err
	}
	if app.DeletionTimestamp != nil {
		return nil
	}
	members, err := d.members(ctx, r, &app)
	if err != nil {
		return err
	}
	if err := d.label(ctx, r, &app, members); err != nil {
		return err
	}
	rows, ready := applicationTable(&app, members)
	if !equalRows(rows, app.Status.Components) || ready != app.Status.Ready {
		patch := map[string]any{"status": map[string]any{"ready": ready, "components": rows}}
		if err := mergePatchStatus(ctx, d.o.Client, &app, patch); err != nil {
			return err
		}
	}
	d.setRows(n, rows) // written: an event that leaves its row so writes nothing
	return nil
}

func mergePatchStatus(ctx context.Context, c client.Client, obj client.Object, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, b))
}

func equalRows(a, b []v1alpha1.ApplicationComponentStatus) bool { return slices.Equal(a, b) }

// member is a Component an Application names or selects (comp nil: it does not exist).
type member struct {
	name string
	comp *v1alpha1.Component
}

// members resolves spec.components ∪ the selector's matches through r, sorted by name:
// the selector's matches listed, the named ones read one by one. Through the cache, a
// Component the watch delivered a newer version of is taken from there (latest).
func (d *applicationDriver) members(ctx context.Context, r client.Reader, app *v1alpha1.Application) ([]member, error) {
	byName := map[string]*v1alpha1.Component{}
	names := slices.Clone(app.Spec.Components)
	if app.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(app.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("selector: %w", err)
		}
		if !sel.Empty() {
			var list v1alpha1.ComponentList
			if err := r.List(ctx, &list, client.InNamespace(app.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
				return nil, fmt.Errorf("list components: %w", err)
			}
			for i := range list.Items {
				c := &list.Items[i]
				byName[c.Name] = c
				names = append(names, c.Name)
			}
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	out := make([]member, len(names))
	for i, n := range names {
		out[i].name = n
		if c, ok := byName[n]; ok {
			out[i].comp = c
			continue
		}
		var c v1alpha1.Component
		switch err := r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: n}, &c); {
		case err == nil:
			out[i].comp = &c
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read component %s: %w", n, err)
		}
	}
	d.newest(app.Namespace, out)
	return out, nil
}

// newest replaces members read from the cache by the newer versions the watch delivered
// (a direct read is never older). A Component last seen being deleted that the reader no
// longer has is gone.
func (d *applicationDriver) newest(ns string, members []member) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range members {
		key := types.NamespacedName{Namespace: ns, Name: members[i].name}
		l, ok := d.latest[key]
		switch {
		case !ok:
		case members[i].comp == nil && l.DeletionTimestamp != nil:
			delete(d.latest, key)
		case members[i].comp == nil || newerVersion(l.ResourceVersion, members[i].comp.ResourceVersion):
			members[i].comp = l
		}
	}
}

// newerVersion reports whether resourceVersion a is newer than b (etcd revisions; a
// version that is not a number is never newer).
func newerVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// applicationTable is the status table: one row per member and "ready/total".
func applicationTable(app *v1alpha1.Application, members []member) ([]v1alpha1.ApplicationComponentStatus, string) {
	rows := make([]v1alpha1.ApplicationComponentStatus, len(members))
	ready := 0
	for i, m := range members {
		rows[i] = componentRow(m)
		if rows[i].Ready {
			ready++
		}
	}
	return rows, fmt.Sprintf("%d/%d", ready, len(members))
}

// componentRow is one Component's row: its phase, and when not ready the reason: the
// dependencies it waits for, else what keeps it Stalled or Reconciling (the pods' reason),
// else its Ready condition's reason and message.
func componentRow(m member) v1alpha1.ApplicationComponentStatus {
	r := v1alpha1.ApplicationComponentStatus{Name: m.name}
	if m.comp == nil {
		r.Reason, r.Message = "NotFound", "Component "+m.name+" does not exist"
		return r
	}
	st := m.comp.Status.Status
	r.Phase = st.Phase
	readyCond := meta.FindStatusCondition(st.Conditions, lifecycle.ConditionReady)
	r.Ready = st.Phase == lifecycle.PhaseActive && readyCond != nil && readyCond.Status == metav1.ConditionTrue
	if r.Ready {
		return r
	}
	if dc := meta.FindStatusCondition(st.Conditions, lifecycle.ConditionDependenciesReady); dc != nil && dc.Status == metav1.ConditionFalse {
		r.Reason, r.Message = firstNonEmptyStr(dc.Reason, "DependenciesNotReady"), dc.Message
		return r
	}
	for _, t := range []string{lifecycle.ConditionStalled, lifecycle.ConditionReconciling} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			r.Reason, r.Message = c.Reason, c.Message
			return r
		}
	}
	if readyCond != nil {
		r.Reason, r.Message = readyCond.Reason, readyCond.Message
	}
	if r.Reason == "" {
		r.Reason = "Pending"
	}
	return r
}

func firstNonEmptyStr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// wantLabels are the labels an Application puts on its member Components.
func wantLabels(app *v1alpha1.Application) map[string]string {
	return map[string]string{labelApplicationKey: app.Name, labelPartOf: app.Name}
}

// label adds the Application's labels to its members and removes them from Components it
// no longer claims (metadata patches only).
func (d *applicationDriver) label(ctx context.Context, r client.Reader, app *v1alpha1.Application, members []member) error {
	want := wantLabels(app)
	claimed := map[string]bool{}
	for _, m := range members {
		claimed[m.name] = true
		if m.comp == nil {
			continue
		}
		if other := m.comp.Labels[labelApplicationKey]; other != "" && other != app.Name {
			continue // claimed by another Application first
		}
		patch := map[string]any{}
		for k, v := range want {
			if m.comp.Labels[k] != v {
				patch[k] = v
			}
		}
		if len(patch) > 0 {
			if err := mergePatch(ctx, d.o.Client, m.comp.DeepCopy(), map[string]any{"metadata": map[string]any{"labels": patch}}); err != nil {
				return fmt.Errorf("label component %s: %w", m.name, err)
			}
		}
	}
	var list v1alpha1.ComponentList
	if err := r.List(ctx, &list, client.InNamespace(app.Namespace), client.MatchingLabels{labelApplicationKey: app.Name}); err != nil {
		return fmt.Errorf("list labelled components: %w", err)
	}
	for i := range list.Items {
		c := &list.Items[i]
		if claimed[c.Name] {
			continue
		}
		patch := map[string]any{"metadata": map[string]any{"labels": map[string]any{labelApplicationKey: nil, labelPartOf: nil}}}
		if err := mergePatch(ctx, d.o.Client, c.DeepCopy(), patch); err != nil {
			return fmt.Errorf("unlabel component %s: %w", c.Name, err)
		}
	}
	return nil
}

func (d *applicationDriver) labelsUpToDate(app *v1alpha1.Application, members []member) bool {
	want := wantLabels(app)
	for _, m := range members {
		if m.comp == nil || (m.comp.Labels[labelApplicationKey] != "" && m.comp.Labels[labelApplicationKey] != app.Name) {
			continue
		}
		for k, v := range want {
			if m.comp.Labels[k] != v {
				return false
			}
		}
	}
	return true
}

func (d *applicationDriver) Observe(ctx context.Context, app *v1alpha1.Application) (lifecycle.Outcome, error) {
	d.remember(app)
	members, err := d.members(ctx, d.o.cached(), app)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if !d.labelsUpToDate(app, members) {
		return lifecycle.Outcome{Exists: true}, nil
	}
	return d.summarize(app, members), nil
}

func (d *applicationDriver) Provision(ctx context.Context, app *v1alpha1.Application) (lifecycle.Outcome, error) {
	return d.Update(ctx, app)
}

func (d *applicationDriver) Update(ctx context.Context, app *v1alpha1.Application) (lifecycle.Outcome, error) {
	members, err := d.members(ctx, d.o.cached(), app)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if err := d.label(ctx, d.o.cached(), app, members); err != nil {
		return lifecycle.Outcome{}, err
	}
	return d.summarize(app, members), nil
}

// summarize writes the table into app's status: Ready only when every member is.
func (d *applicationDriver) summarize(app *v1alpha1.Application, members []member) lifecycle.Outcome {
	rows, ready := applicationTable(app, members)
	d.setRows(types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, rows)
	app.Status.Components, app.Status.Ready = rows, ready
	var waiting []string
	for _, r := range rows {
		if !r.Ready {
			waiting = append(waiting, fmt.Sprintf("%s: %s %s", r.Name, r.Reason, r.Message))
		}
	}
	if len(members) == 0 {
		return lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "NoComponents", Message: "the Application names and selects no Component"}
	}
	if len(waiting) > 0 {
		return lifecycle.Outcome{Exists: true, UpToDate: true, Phase: lifecycle.PhaseReconciling, Reason: "ComponentsNotReady",
			Message: ready + " ready; " + strings.Join(waiting, "; "), RequeueAfter: 30 * time.Second}
	}
	return lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "ComponentsReady", Message: ready + " Components ready"}
}

// dataKinds are the kinds a Component uses that an Application never deletes.
var dataKinds = []string{"Database", "Cache", "Topic", "Bucket", "Volume"}

// kept lists the used data services and Volumes with deletionPolicy Retain.
func (d *applicationDriver) kept(ctx context.Context, ns string, comps []*v1alpha1.Component) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, c := range comps {
		for _, u := range c.Spec.Uses {
			key := u.Kind + "/" + u.Name
			if seen[key] || !slices.Contains(dataKinds, u.Kind) {
				continue
			}
			seen[key] = true
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(v1alpha1.GroupVersion.String())
			obj.SetKind(u.Kind)
			if err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: u.Name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("read %s: %w", key, err)
			}
			p, _, _ := unstructured.NestedString(obj.Object, "spec", "deletionPolicy")
			if deletionPolicy(p) == v1alpha1.DeletionRetain {
				out = append(out, fmt.Sprintf("kept %s (deletionPolicy Retain)", key))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
