package lifecycle

import (
	"slices"
	"testing"
)

func TestLinkDecisions(t *testing.T) {
	for _, tc := range []struct {
		link   Link
		exists bool
		phase  Phase
		holds  bool
	}{
		{Requires, false, PhaseNone, true},
		{Requires, true, PhasePending, true},
		{Requires, true, PhaseReconciling, true},
		{Requires, true, PhaseFailed, true},
		{Requires, true, PhaseDeleting, true},
		{Requires, true, PhaseActive, false},
		// Ordering only: a Component under rollout (Reconciling) or failing does not hold
		// its Release; only its absence does.
		{References, false, PhaseNone, true},
		{References, true, PhasePending, false},
		{References, true, PhaseReconciling, false},
		{References, true, PhaseFailed, false},
		{References, true, PhaseDeleting, false},
		{References, true, PhaseActive, false},
		{Contains, false, PhaseNone, true},
		{Contains, true, PhaseReconciling, true},
		{Contains, true, PhaseActive, false},
	} {
		if got := tc.link.Holds(tc.exists, tc.phase); got != tc.holds {
			t.Errorf("%s.Holds(exists %v, %s) = %v, want %v", tc.link, tc.exists, tc.phase, got, tc.holds)
		}
	}
	for _, tc := range []struct {
		link                        Link
		teardown, dependentTeardown bool
		drawn                       bool
	}{
		{Requires, true, false, false},
		{References, true, false, true},
		{Contains, false, true, false},
	} {
		if got := tc.link.HoldsTeardown(); got != tc.teardown {
			t.Errorf("%s.HoldsTeardown() = %v", tc.link, got)
		}
		if got := tc.link.HoldsDependentTeardown(); got != tc.dependentTeardown {
			t.Errorf("%s.HoldsDependentTeardown() = %v", tc.link, got)
		}
		if got := tc.link.Drawn(); got != tc.drawn {
			t.Errorf("%s.Drawn() = %v", tc.link, got)
		}
	}
	if s := Link(9).String(); s != "Link(9)" {
		t.Errorf("Link(9) = %s", s)
	}
}

func TestMergeDeps(t *testing.T) {
	a, b, c, d := ref("a"), ref("b"), ref("c"), ref("d")
	for _, tc := range []struct {
		name                   string
		requires, refs, member []Ref
		want                   []Dep
	}{
		{"none", nil, nil, nil, nil},
		{"one each", []Ref{a}, []Ref{b}, []Ref{c}, []Dep{{a, Requires}, {b, References}, {c, Contains}}},
		{"requires wins over references", []Ref{b}, []Ref{b, a}, nil, []Dep{{a, References}, {b, Requires}}},
		{"contains wins over references", nil, []Ref{c}, []Ref{c}, []Dep{{c, Contains}}},
		{"requires wins over contains", []Ref{d}, nil, []Ref{d}, []Dep{{d, Requires}}},
		{"duplicates collapse", []Ref{a, a}, []Ref{b, b}, nil, []Dep{{a, Requires}, {b, References}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeDeps(tc.requires, tc.refs, tc.member); !slices.Equal(got, tc.want) {
				t.Errorf("mergeDeps = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGraphLinks: what the tooling draws, what holds a reconcile and the teardown order
// with a Release (References its Component), an Application (Contains its Components) and a
// Route (Requires its Component).
func TestGraphLinks(t *testing.T) {
	app, web, db, rel, route := ref("app"), ref("web"), ref("db"), ref("release"), ref("route")
	g := NewGraph()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.SetLinks(web, Deps(Requires, db)))
	must(g.SetLinks(rel, Deps(References, web)))
	must(g.SetLinks(route, Deps(Requires, web)))
	must(g.SetLinks(app, Deps(Contains, web)))
	names := func(refs []Ref) []string {
		out := make([]string, len(refs))
		for i, r := range refs {
			out[i] = r.Name
		}
		return out
	}
	for _, tc := range []struct {
		what string
		got  []Ref
		want []string
	}{
		// The tree of app: app → web → db, release.
		{"Dependencies(app)", g.Dependencies(app), []string{"web"}},
		{"Dependencies(web)", g.Dependencies(web), []string{"db", "release"}},
		{"Dependencies(release)", g.Dependencies(rel), []string{}},
		{"Dependents(web)", g.Dependents(web), []string{"app", "release", "route"}},
		{"Dependents(release)", g.Dependents(rel), []string{}},
		// Deleting db takes web and what depends on it for teardown, never the app.
		{"TeardownOrder(db)", g.TeardownOrder(db), []string{"release", "route", "web", "db"}},
	} {
		got := names(tc.got)
		if tc.what == "TeardownOrder(db)" {
			// release and route are unordered between themselves.
			if len(got) == 4 && got[0] == "route" {
				got[0], got[1] = got[1], got[0]
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.what, got, tc.want)
		}
	}
	if l := g.Links(rel); !slices.Equal(l, []Dep{{web, References}}) {
		t.Errorf("Links(release) = %v", l)
	}
	if l := g.DependentLinks(web); !slices.Equal(l, []Dep{{app, Contains}, {rel, References}, {route, Requires}}) {
		t.Errorf("DependentLinks(web) = %v", l)
	}
	states := map[Ref]Phase{db: PhaseActive, web: PhaseReconciling, app: PhaseActive}
	state := func(r Ref) (Phase, bool) { p, ok := states[r]; return p, ok }
	for _, tc := range []struct {
		obj  Ref
		want []string
	}{
		{rel, []string{}},        // web Reconciling: the Release goes on
		{route, []string{"web"}}, // a Requires edge waits for Active
		{app, []string{"web"}},
		{web, []string{}},
	} {
		if got := names(g.Holding(tc.obj, state)); !slices.Equal(got, tc.want) {
			t.Errorf("Holding(%s) = %v, want %v", tc.obj.Name, got, tc.want)
		}
	}
	delete(states, web)
	if got := names(g.Holding(rel, state)); !slices.Equal(got, []string{"web"}) {
		t.Errorf("Holding(release) with web missing = %v, want [web]", got)
	}
	// A link changes in place; a cycle through a reference is still refused.
	must(g.SetLinks(rel, Deps(Requires, web)))
	if l := g.Links(rel); !slices.Equal(l, []Dep{{web, Requires}}) {
		t.Errorf("Links(release) after the change = %v", l)
	}
	if err := g.SetLinks(db, Deps(References, rel)); err == nil {
		t.Error("db → release closes a cycle through web; accepted")
	}
	checkOrder(t, g)
}
