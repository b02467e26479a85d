package lifecycle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func ref(name string) Ref { return Ref{Kind: "Thing", Namespace: "ns", Name: name} }

func TestGraphCycles(t *testing.T) {
	type edge struct {
		from string
		deps []string
	}
	for _, tc := range []struct {
		name      string
		edges     []edge // applied with AddEdges in order
		wantCycle string // the path of the last edge's error, "" for none
	}{
		{"chain", []edge{{"a", []string{"b"}}, {"b", []string{"c"}}, {"c", []string{"d"}}}, ""},
		{"diamond", []edge{{"a", []string{"b", "c"}}, {"b", []string{"d"}}, {"c", []string{"d"}}}, ""},
		{"self", []edge{{"a", []string{"a"}}}, "a → a"},
		{"two", []edge{{"a", []string{"b"}}, {"b", []string{"a"}}}, "b → a → b"},
		{"three", []edge{{"a", []string{"b"}}, {"b", []string{"c"}}, {"c", []string{"a"}}}, "c → a → b → c"},
		{"reordered then closed", []edge{{"d", []string{"c"}}, {"a", []string{"b"}}, {"b", []string{"c"}}, {"c", []string{"a"}}}, "c → a → b → c"},
		{"edges added out of order", []edge{{"c", []string{"d"}}, {"a", []string{"b"}}, {"b", []string{"c"}}, {"e", []string{"a"}}}, ""},
		{"long way round", []edge{{"a", []string{"b"}}, {"b", []string{"c"}}, {"c", []string{"d"}}, {"x", []string{"a"}}, {"d", []string{"x"}}}, "d → x → a → b → c → d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGraph()
			var err error
			for _, e := range tc.edges {
				deps := make([]Ref, len(e.deps))
				for i, d := range e.deps {
					deps[i] = ref(d)
				}
				err = g.AddEdges(ref(e.from), deps...)
			}
			if tc.wantCycle == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				checkOrder(t, g)
				return
			}
			var ce *CycleError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCycle) {
				t.Fatalf("error %v, want a *CycleError", err)
			}
			names := make([]string, len(ce.Path))
			for i, r := range ce.Path {
				names[i] = r.Name
			}
			if got := strings.Join(names, " → "); got != tc.wantCycle {
				t.Fatalf("cycle %s, want %s", got, tc.wantCycle)
			}
			if !strings.Contains(err.Error(), "Thing/ns/") {
				t.Fatalf("message %q does not name the objects", err)
			}
			checkOrder(t, g)
		})
	}
}

// checkOrder asserts that Order puts every object after its dependencies and that the graph
// holds no cycle.
func checkOrder(t *testing.T, g *Graph) {
	t.Helper()
	pos := map[Ref]int{}
	for i, r := range g.Order() {
		pos[r] = i
	}
	for r := range pos {
		for _, d := range g.Dependencies(r) {
			if pos[d] >= pos[r] {
				t.Fatalf("order puts %s (pos %d) before its dependency %s (pos %d)", r, pos[r], d, pos[d])
			}
		}
	}
}

func TestGraphRefusedUpdateChangesNothing(t *testing.T) {
	g := NewGraph()
	must(t, g.AddEdges(ref("a"), ref("b")))
	must(t, g.AddEdges(ref("b"), ref("c")))
	// c would depend on a new object n and on a: n must not stay behind, nor c → n.
	if err := g.AddEdges(ref("c"), ref("n"), ref("a")); !errors.Is(err, ErrCycle) {
		t.Fatalf("want a cycle, got %v", err)
	}
	if g.Len() != 3 || len(g.Dependencies(ref("c"))) != 0 {
		t.Fatalf("refused update left %d objects, c depends on %v", g.Len(), g.Dependencies(ref("c")))
	}
	// SetDependencies replaces; a refused replacement restores the old edges.
	must(t, g.SetDependencies(ref("a"), []Ref{ref("c")}))
	if got := g.Dependencies(ref("a")); !slices.Equal(got, []Ref{ref("c")}) {
		t.Fatalf("a depends on %v after replace", got)
	}
	if err := g.SetDependencies(ref("c"), []Ref{ref("a")}); !errors.Is(err, ErrCycle) {
		t.Fatalf("want a cycle, got %v", err)
	}
	// Check is a dry run either way.
	if err := g.Check(ref("b"), []Ref{ref("new")}); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ref("c"), []Ref{ref("b")}); !errors.Is(err, ErrCycle) {
		t.Fatalf("Check missed a cycle: %v", err)
	}
	if g.Len() != 3 || !slices.Equal(g.Dependencies(ref("b")), []Ref{ref("c")}) {
		t.Fatalf("Check changed the graph: %d objects, b depends on %v", g.Len(), g.Dependencies(ref("b")))
	}
	g.Remove(ref("c"))
	if g.Len() != 2 || len(g.Dependencies(ref("a"))) != 0 {
		t.Fatalf("Remove left edges: a depends on %v", g.Dependencies(ref("a")))
	}
	checkOrder(t, g)
}

func TestTeardownOrderAndBlocking(t *testing.T) {
	g := NewGraph()
	tenant := Ref{Kind: "Tenant", Name: "acme"}
	quota := Ref{Kind: "Quota", Namespace: "acme", Name: "q"}
	policy := Ref{Kind: "AccessPolicy", Namespace: "acme", Name: "p"}
	issuer := Ref{Kind: "Credential", Namespace: "acme", Name: "ca"}
	cert := Ref{Kind: "Certificate", Namespace: "acme", Name: "web"}
	other := Ref{Kind: "Tenant", Name: "other"}
	must(t, g.AddEdges(cert, issuer))
	must(t, g.AddEdges(quota, tenant))
	must(t, g.AddEdges(policy, tenant))
	must(t, g.AddEdges(issuer, tenant))
	must(t, g.AddEdges(other))
	order := g.TeardownOrder(tenant)
	if len(order) != 5 || order[len(order)-1] != tenant {
		t.Fatalf("teardown %v: want 5 objects ending with the tenant", order)
	}
	pos := map[Ref]int{}
	for i, r := range order {
		pos[r] = i
	}
	if pos[cert] > pos[issuer] {
		t.Fatalf("teardown %v deletes the issuer before the certificate", order)
	}
	if _, ok := pos[other]; ok {
		t.Fatalf("teardown of acme includes another tenant")
	}
	if g.TeardownOrder(Ref{Kind: "Tenant", Name: "missing"}) != nil {
		t.Fatalf("teardown of a missing object")
	}
	active := map[Ref]bool{tenant: true}
	blocking := g.Blocking(cert, func(r Ref) bool { return active[r] })
	if !slices.Equal(blocking, []Ref{issuer}) {
		t.Fatalf("certificate blocked by %v, want the issuer", blocking)
	}
	active[issuer] = true
	if b := g.Blocking(cert, func(r Ref) bool { return active[r] }); len(b) != 0 {
		t.Fatalf("certificate still blocked by %v", b)
	}
}

// A random workload against a from-scratch reachability check.
func TestGraphAgainstFullRecompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := NewGraph()
	adj := map[Ref]map[Ref]bool{}
	reaches := func(from, to Ref) bool { // does from (transitively) depend on to?
		seen := map[Ref]bool{}
		stack := []Ref{from}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == to {
				return true
			}
			for d := range adj[n] {
				if !seen[d] {
					seen[d] = true
					stack = append(stack, d)
				}
			}
		}
		return false
	}
	for i := 0; i < 3000; i++ {
		a, b := ref(fmt.Sprint(rng.IntN(60))), ref(fmt.Sprint(rng.IntN(60)))
		if rng.IntN(10) == 0 {
			g.Remove(a)
			delete(adj, a)
			for _, m := range adj {
				delete(m, a)
			}
			continue
		}
		checkErr := g.Check(a, append(g.Dependencies(a), b))
		err := g.AddEdges(a, b)
		if (checkErr == nil) != (err == nil) {
			t.Fatalf("step %d: Check says %v, AddEdges says %v", i, checkErr, err)
		}
		wantCycle := a == b || reaches(b, a)
		if wantCycle != (err != nil) {
			t.Fatalf("step %d: %s → %s: err %v, want cycle=%v", i, a, b, err, wantCycle)
		}
		if err == nil {
			if adj[a] == nil {
				adj[a] = map[Ref]bool{}
			}
			adj[a][b] = true
			if adj[b] == nil {
				adj[b] = map[Ref]bool{}
			}
		} else {
			for _, e := range []error{err, checkErr} {
				var ce *CycleError
				errors.As(e, &ce)
				p := ce.Path
				if p[0] != a || p[len(p)-1] != a || p[1] != b {
					t.Fatalf("step %d: cycle path %v does not start with the new edge %s → %s", i, p, a, b)
				}
				for j := 1; j+1 < len(p); j++ {
					if !adj[p[j]][p[j+1]] {
						t.Fatalf("step %d: cycle path %v has a step %s → %s that is not an edge", i, p, p[j], p[j+1])
					}
				}
			}
		}
	}
	checkOrder(t, g)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
