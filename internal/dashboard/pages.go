package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/internal/ctl"
	"kubeos.dev/kube/internal/ctl/listing"
	"kubeos.dev/kube/internal/ctl/opsapi"
)

var (
	errNoKind = errors.New("not a lifecycle-managed kind")
	errHidden = errors.New("hidden")
)

// kindError answers kindOf's errors.
func (d *Dashboard) kindError(w http.ResponseWriter, r *http.Request, u *user, err error) {
	switch {
	case errors.Is(err, errNoKind):
		d.fail(w, r, u, http.StatusNotFound, "Not found", err.Error())
	case errors.Is(err, errHidden):
		d.fail(w, r, u, http.StatusForbidden, "Forbidden", strings.TrimPrefix(err.Error(), errHidden.Error()+": "))
	default:
		d.apiError(w, r, u, err)
	}
}

func (d *Dashboard) basePage(u *user, title, stream string) page {
	return page{Title: title, User: u.name, CSRF: d.sessions.csrfToken(u.credID), Stream: stream}
}

// nsPath is a namespace in a URL path: "-" for the cluster scope.
func nsPath(ns string) string {
	if ns == "" {
		return "-"
	}
	return ns
}

func objectURL(resource, namespace, name string) string {
	return Prefix + "objects/" + url.PathEscape(resource) + "/" + url.PathEscape(nsPath(namespace)) + "/" + url.PathEscape(name)
}

func kindURL(resource, namespace string) string {
	u := Prefix + "kinds/" + url.PathEscape(resource)
	if namespace != "" {
		u += "?ns=" + url.QueryEscape(namespace)
	}
	return u
}

func streamURL(view, resource, namespace, name string) string {
	q := url.Values{"view": {view}}
	for k, v := range map[string]string{"resource": resource, "ns": namespace, "name": name} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return Prefix + "stream?" + q.Encode()
}

// --- health ---

type healthData struct {
	Namespace string
	Rows      []healthRow
	Hidden    []opsapi.HiddenKind
	Bus       opsapi.BusState
	// Refused is set when the user may not read health in this scope.
	Refused string
}

type healthRow struct {
	Kind, Resource, Link string
	Namespaced           bool
	Total                int
	Phases               []phaseCount
	Stalled, Failed      int
	Oldest, Since        string
	Reconciles, Errors   uint64
	P99                  string
	Unhealthy            bool
}

type phaseCount struct {
	Phase, Class, Link string
	N                  int
}

// phaseClass is the CSS class of a phase (its colour).
func phaseClass(p string) string {
	switch p {
	case "Active":
		return "ph-active"
	case "Failed":
		return "ph-failed"
	case "Deleting":
		return "ph-deleting"
	case "Pending", "Reconciling":
		return "ph-working"
	case "":
		return "ph-none"
	}
	return "ph-other"
}

func (d *Dashboard) healthPage(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r.Context())
	ns := r.URL.Query().Get("ns")
	p := d.basePage(u, "Health", streamURL("health", "", ns, ""))
	data := healthData{Namespace: ns}
	l, err := u.health(r.Context(), ns, "")
	switch {
	case apierrors.IsForbidden(err):
		data.Refused = err.Error()
		p.Stream = ""
	case err != nil:
		d.apiError(w, r, u, err)
		return
	default:
		data.Hidden, data.Bus = l.Hidden, l.EventBus
		for _, k := range l.Items {
			data.Rows = append(data.Rows, healthRowOf(k, ns))
		}
		slices.SortFunc(data.Rows, func(a, b healthRow) int { return strings.Compare(a.Kind, b.Kind) })
	}
	p.Content = data
	d.render(w, r, http.StatusOK, "health", p)
}

func healthRowOf(k opsapi.KindHealth, ns string) healthRow {
	h := healthRow{Kind: k.Kind, Resource: k.Resource, Link: kindURL(k.Resource, ns), Namespaced: k.Namespaced, Total: k.Total,
		Stalled: k.Stalled, Failed: k.Failed, Oldest: k.OldestReconciling, Reconciles: k.Reconciles, Errors: k.Errors,
		Unhealthy: k.Stalled > 0 || k.Failed > 0}
	if k.ReconcilingSince != nil {
		h.Since = k.ReconcilingSince.UTC().Format("2006-01-02 15:04:05Z")
	}
	if k.Reconciles > 0 {
		h.P99 = strconv.FormatFloat(k.ReconcileP99Seconds*1000, 'f', 1, 64) + " ms"
	}
	for ph, n := range k.Phases {
		link := kindURL(k.Resource, ns)
		sep := "?"
		if strings.Contains(link, "?") {
			sep = "&"
		}
		h.Phases = append(h.Phases, phaseCount{Phase: ph, Class: phaseClass(ph), N: n, Link: link + sep + "phase=" + url.QueryEscape(ph)})
	}
	slices.SortFunc(h.Phases, func(a, b phaseCount) int { return strings.Compare(a.Phase, b.Phase) })
	return h
}

// --- kind list ---

// maxPage bounds ?page (its offset must stay an int).
const maxPage = 1 << 20

// phaseOptions are the lifecycle phases (pkg/lifecycle) a list can be filtered by.
var phaseOptions = []string{"Pending", "Reconciling", "Active", "Failed", "Deleting"}

type kindData struct {
	Kind, Resource, Namespace string
	Namespaced                bool
	Total                     int
	Phases                    []phaseCount
	Query                     listQuery
	Rows                      []listRow
	// Matched is how many passed the filter (-1 when the API pages and the count is the
	// kind's total).
	Matched      int
	From, To     int
	Next, Prev   string
	First        string
	Sorts        []sortLink
	PhaseOptions []string
	SimplePaging bool
}

type listRow struct {
	row
	Link, Class, Age string
	Conds            []condView
}

type condView struct {
	Type, Status, Reason, Class string
}

type sortLink struct {
	Key, Label, Link string
	Active           bool
}

func condViews(cs []metav1.Condition) []condView {
	var out []condView
	for _, c := range cs {
		cl := "c-" + strings.ToLower(string(c.Status))
		// Stalled and Reconciling are abnormal-true conditions.
		if c.Type == "Stalled" || c.Type == "Reconciling" {
			if c.Status == metav1.ConditionTrue {
				cl = "c-false"
			} else {
				cl = "c-true"
			}
		}
		out = append(out, condView{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Class: cl})
	}
	return out
}

func (d *Dashboard) kindPage(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r.Context())
	ctx := r.Context()
	resource := r.PathValue("resource")
	q := r.URL.Query()
	ns := q.Get("ns")
	k, kh, err := d.kindOf(ctx, u, resource, ns)
	if err != nil && ns != "" && errors.Is(err, errNoKind) {
		k, kh, err = d.kindOf(ctx, u, resource, "") // a cluster-scoped kind
		ns = ""
	}
	if err != nil {
		d.kindError(w, r, u, err)
		return
	}
	if !k.Namespaced {
		ns = ""
	}
	lq := listQuery{Phase: q.Get("phase"), Text: q.Get("q"), Sort: q.Get("sort"), Size: d.o.PageSize}
	if !listing.ValidSort(lq.Sort) {
		d.fail(w, r, u, http.StatusBadRequest, "Bad request", fmt.Sprintf("sort %q: want one of %s, optionally with a leading -", lq.Sort, strings.Join(listing.SortKeys, ", ")))
		return
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxPage {
			d.fail(w, r, u, http.StatusBadRequest, "Bad request", fmt.Sprintf("page %q: want an integer from 0 to %d", v, maxPage))
			return
		}
		lq.Page = n
	}
	data := kindData{Kind: k.Kind, Resource: k.Resource, Namespace: ns, Namespaced: k.Namespaced, Total: kh.Total, Query: lq,
		PhaseOptions: phaseOptions}
	for _, pc := range healthRowOf(*kh, ns).Phases {
		data.Phases = append(data.Phases, pc)
	}
	base := url.Values{}
	for key, v := range map[string]string{"ns": ns, "phase": lq.Phase, "q": lq.Text, "sort": lq.Sort} {
		if v != "" {
			base.Set(key, v)
		}
	}
	link := func(extra url.Values) string {
		v := url.Values{}
		for key, vs := range base {
			v[key] = vs
		}
		for key, vs := range extra {
			v[key] = vs
		}
		s := Prefix + "kinds/" + url.PathEscape(k.Resource)
		if e := v.Encode(); e != "" {
			s += "?" + e
		}
		return s
	}
	for _, s := range listing.SortKeys {
		cur := strings.TrimPrefix(lq.Sort, "-")
		if cur == "" {
			cur = "name"
		}
		key := s
		if cur == s && !strings.HasPrefix(lq.Sort, "-") {
			key = "-" + s
		}
		v := url.Values{"sort": {key}}
		data.Sorts = append(data.Sorts, sortLink{Key: s, Label: s, Link: link(v), Active: cur == s})
	}
	var rows []row
	if lq.Simple() {
		// The API's order is the name's: page through it with continue tokens.
		data.SimplePaging = true
		l, err := u.listPage(ctx, k, ns, lq.Size, q.Get("continue"))
		if err != nil {
			d.apiError(w, r, u, err)
			return
		}
		for i := range l.Items {
			rows = append(rows, rowOfItem(&l.Items[i]))
		}
		data.Matched = -1
		data.From = lq.Page*lq.Size + 1
		data.To = lq.Page*lq.Size + len(rows)
		if c := l.Metadata.Continue; c != "" {
			data.Next = link(url.Values{"continue": {c}, "page": {strconv.Itoa(lq.Page + 1)}})
		}
		if lq.Page > 0 {
			data.First = link(nil)
		}
	} else {
		// Filtered or sorted otherwise: the server filters, sorts and pages its informer
		// copies (after authorizing a list of the kind here as the user); one page travels.
		l, err := u.objects(ctx, k, ns, lq)
		if err != nil {
			d.apiError(w, r, u, err)
			return
		}
		for i := range l.Items {
			rows = append(rows, rowOfObject(&l.Items[i]))
		}
		data.Matched = l.Matched
		data.From, data.To = lq.Page*lq.Size+1, lq.Page*lq.Size+len(rows)
		if data.To < l.Matched {
			data.Next = link(url.Values{"page": {strconv.Itoa(lq.Page + 1)}})
		}
		if lq.Page > 0 {
			data.Prev = link(url.Values{"page": {strconv.Itoa(lq.Page - 1)}})
		}
	}
	now := d.o.Now()
	for _, rw := range rows {
		ct := metav1.NewTime(rw.Created)
		data.Rows = append(data.Rows, listRow{row: rw, Link: objectURL(k.Resource, rw.Namespace, rw.Name), Class: phaseClass(rw.Phase),
			Age: ctl.Age(&ct, now), Conds: condViews(rw.Conditions)})
	}
	p := d.basePage(u, k.Kind, streamURL("kind", k.Resource, ns, ""))
	p.Flash = doneMessages[q.Get("done")]
	p.Content = data
	d.render(w, r, http.StatusOK, "kind", p)
}
