package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Ref names one managed object.
type Ref struct {
	// Kind is the kind, qualified by group when kinds from several groups meet
	// ("Tenant.kubeos.dev").
	Kind      string
	Namespace string
	Name      string
}

// String is Kind/namespace/name, or Kind/name for cluster-scoped objects.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

func compareRefs(a, b Ref) int {
	return strings.Compare(a.String(), b.String())
}

// ErrCycle is wrapped by the *CycleError that graph updates return.
var ErrCycle = errors.New("dependency cycle")

// CycleError carries the cycle an update would have closed, as a path of "depends on" steps
// that starts and ends with the same object.
type CycleError struct {
	Path []Ref
}

func (e *CycleError) Error() string {
	parts := make([]string, len(e.Path))
	for i, r := range e.Path {
		parts[i] = r.String()
	}
	return fmt.Sprintf("%s: %s", ErrCycle, strings.Join(parts, " → "))
}

func (e *CycleError) Unwrap() error { return ErrCycle }

// Graph is the dependency graph of managed objects. An edge A → B means "A depends on B":
// B is provisioned before A and torn down after it. The graph is always acyclic: an update
// that would close a cycle is refused with the cycle and leaves the graph as it was.
//
// Cycle checks are incremental (Pearce–Kelly dynamic topological order): the graph keeps a
// topological index per object; an edge that agrees with it costs O(1), and one that does
// not searches only the objects whose index lies between its two ends, then reorders just
// those. Safe for concurrent use.
type Graph struct {
	mu         sync.Mutex
	ids        map[Ref]int
	refs       []Ref
	free       []int
	deps       []map[int]Link // id depends on these, through the link
	dependents []map[int]Link // these depend on id, through the link
	ord        []int          // ord[dep] < ord[dependent] for every edge
	nextOrd    int

	// DFS scratch, reused across checks.
	mark   []uint32
	epoch  uint32
	parent []int
	stack  []int
	fwd    []int
	bwd    []int
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{ids: map[Ref]int{}}
}

// Len is the number of objects in the graph.
func (g *Graph) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ids)
}

func (g *Graph) node(r Ref) (id int, created bool) {
	if id, ok := g.ids[r]; ok {
		return id, false
	}
	if n := len(g.free); n > 0 {
		id = g.free[n-1]
		g.free = g.free[:n-1]
		g.refs[id] = r
		g.deps[id] = map[int]Link{}
		g.dependents[id] = map[int]Link{}
		g.ord[id] = g.nextOrd
	} else {
		id = len(g.refs)
		g.refs = append(g.refs, r)
		g.deps = append(g.deps, map[int]Link{})
		g.dependents = append(g.dependents, map[int]Link{})
		g.ord = append(g.ord, g.nextOrd)
		g.mark = append(g.mark, 0)
		g.parent = append(g.parent, -1)
	}
	g.nextOrd++
	g.ids[r] = id
	return id, true
}

func (g *Graph) drop(id int) {
	for d := range g.deps[id] {
		delete(g.dependents[d], id)
	}
	for d := range g.dependents[id] {
		delete(g.deps[d], id)
	}
	delete(g.ids, g.refs[id])
	g.refs[id], g.deps[id], g.dependents[id] = Ref{}, nil, nil
	g.free = append(g.free, id)
}

// AddEdges records that from depends on each of deps (link Requires), adding objects as
// needed. If any edge would close a cycle, none is added and the error is a *CycleError.
func (g *Graph) AddEdges(from Ref, deps ...Ref) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.setLocked(from, Deps(Requires, deps...), false)
}

// SetDependencies makes deps the complete list of what from depends on, all through
// Requires (what an informer sees on each update of from). On a cycle nothing changes and
// the error is a *CycleError.
func (g *Graph) SetDependencies(from Ref, deps []Ref) error {
	return g.SetLinks(from, Deps(Requires, deps...))
}

// SetLinks makes deps the complete list of what from depends on, each through its link
// (a target listed twice keeps the last link). On a cycle nothing changes and the error is
// a *CycleError.
func (g *Graph) SetLinks(from Ref, deps []Dep) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.setLocked(from, deps, true)
}

// Check reports whether SetDependencies(from, deps) would succeed, without changing the
// graph: the admission-time question. It only reads: for each new dependency it searches
// what that dependency depends on, pruned by the topological order (anything ordered before
// from cannot lead back to it).
func (g *Graph) Check(from Ref, deps []Ref) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	x, ok := g.ids[from]
	if !ok {
		// A new object has no dependents, so only depending on itself closes a cycle.
		if slices.Contains(deps, from) {
			return &CycleError{Path: []Ref{from, from}}
		}
		return nil
	}
	for _, d := range deps {
		y, ok := g.ids[d]
		if !ok {
			continue
		}
		if x == y {
			return &CycleError{Path: []Ref{from, from}}
		}
		if _, ok := g.deps[x][y]; ok || g.ord[y] < g.ord[x] {
			continue
		}
		if err := g.reachesLocked(x, y); err != nil {
			return err
		}
	}
	return nil
}

// reachesLocked returns a *CycleError when y depends on x (so "x depends on y" would close
// a cycle), searching y's dependencies with order above x's.
func (g *Graph) reachesLocked(x, y int) error {
	g.nextEpoch()
	lb := g.ord[x]
	g.stack = append(g.stack[:0], y)
	g.mark[y] = g.epoch
	g.parent[y] = -1
	for len(g.stack) > 0 {
		n := g.stack[len(g.stack)-1]
		g.stack = g.stack[:len(g.stack)-1]
		for w := range g.deps[n] {
			if w == x {
				path := []Ref{g.refs[x]}
				var back []Ref
				for m := n; m != -1; m = g.parent[m] {
					back = append(back, g.refs[m])
				}
				slices.Reverse(back)
				return &CycleError{Path: append(append(path, back...), g.refs[x])}
			}
			if g.mark[w] != g.epoch && g.ord[w] > lb {
				g.mark[w] = g.epoch
				g.parent[w] = n
				g.stack = append(g.stack, w)
			}
		}
	}
	return nil
}

func (g *Graph) nextEpoch() {
	g.epoch++
	if g.epoch == 0 { // wrapped: clear marks
		clear(g.mark)
		g.epoch = 1
	}
}

func (g *Graph) snapshot(from Ref) ([]Dep, bool) {
	id, ok := g.ids[from]
	if !ok {
		return nil, false
	}
	old := make([]Dep, 0, len(g.deps[id]))
	for d, l := range g.deps[id] {
		old = append(old, Dep{Ref: g.refs[d], Link: l})
	}
	return old, true
}

// restore puts from's dependencies back to old.
func (g *Graph) restore(from Ref, old []Dep) {
	id := g.ids[from]
	for d := range g.deps[id] {
		g.removeEdge(id, d)
	}
	for _, r := range old {
		// The order may have moved since these edges were removed; re-adding through addEdge
		// repairs it. It cannot find a cycle: the result is the graph as it was.
		_ = g.addEdge(id, g.ids[r.Ref], r.Link)
	}
}

func (g *Graph) removeEdge(from, dep int) {
	delete(g.deps[from], dep)
	delete(g.dependents[dep], from)
}

func (g *Graph) setLocked(from Ref, deps []Dep, replace bool) error {
	old, existed := g.snapshot(from)
	fid, _ := g.node(from)
	var created []int
	if !existed {
		created = append(created, fid)
	}
	if replace {
		want := map[Ref]bool{}
		for _, d := range deps {
			want[d.Ref] = true
		}
		for d := range g.deps[fid] {
			if !want[g.refs[d]] {
				g.removeEdge(fid, d)
			}
		}
	}
	for _, d := range deps {
		did, isNew := g.node(d.Ref)
		if isNew {
			created = append(created, did)
		}
		if _, ok := g.deps[fid][did]; ok {
			// Same edge: a new link changes nothing in the order.
			g.deps[fid][did], g.dependents[did][fid] = d.Link, d.Link
			continue
		}
		if err := g.addEdge(fid, did, d.Link); err != nil {
			g.restore(from, old)
			for i := len(created) - 1; i >= 0; i-- {
				g.drop(created[i])
			}
			return err
		}
	}
	return nil
}

// addEdge adds "x depends on y" through l, keeping ord a topological order (Pearce–Kelly).
func (g *Graph) addEdge(x, y int, l Link) error {
	if x == y {
		return &CycleError{Path: []Ref{g.refs[x], g.refs[x]}}
	}
	lb, ub := g.ord[x], g.ord[y]
	if ub < lb { // y already comes before x
		g.deps[x][y] = l
		g.dependents[y][x] = l
		return nil
	}
	g.nextEpoch()
	// Forward: from x through its dependents, only objects ordered before y.
	g.fwd = g.fwd[:0]
	g.stack = append(g.stack[:0], x)
	g.mark[x] = g.epoch
	g.parent[x] = -1
	for len(g.stack) > 0 {
		n := g.stack[len(g.stack)-1]
		g.stack = g.stack[:len(g.stack)-1]
		g.fwd = append(g.fwd, n)
		for w := range g.dependents[n] {
			if w == y {
				return g.cycle(x, y, n)
			}
			if g.mark[w] != g.epoch && g.ord[w] < ub {
				g.mark[w] = g.epoch
				g.parent[w] = n
				g.stack = append(g.stack, w)
			}
		}
	}
	// Backward: from y through its dependencies, only objects ordered after x.
	g.bwd = g.bwd[:0]
	g.stack = append(g.stack[:0], y)
	g.mark[y] = g.epoch
	for len(g.stack) > 0 {
		n := g.stack[len(g.stack)-1]
		g.stack = g.stack[:len(g.stack)-1]
		g.bwd = append(g.bwd, n)
		for w := range g.deps[n] {
			if g.mark[w] != g.epoch && g.ord[w] > lb {
				g.mark[w] = g.epoch
				g.stack = append(g.stack, w)
			}
		}
	}
	// Reorder: the backward set (y and what it depends on) takes the lowest of the pooled
	// indices, the forward set (x and its dependents) the rest, each keeping its own order.
	byOrd := func(a, b int) int { return g.ord[a] - g.ord[b] }
	slices.SortFunc(g.bwd, byOrd)
	slices.SortFunc(g.fwd, byOrd)
	pool := make([]int, 0, len(g.bwd)+len(g.fwd))
	for _, n := range g.bwd {
		pool = append(pool, g.ord[n])
	}
	for _, n := range g.fwd {
		pool = append(pool, g.ord[n])
	}
	slices.Sort(pool)
	i := 0
	for _, n := range g.bwd {
		g.ord[n] = pool[i]
		i++
	}
	for _, n := range g.fwd {
		g.ord[n] = pool[i]
		i++
	}
	g.deps[x][y] = l
	g.dependents[y][x] = l
	return nil
}

// cycle builds the path for "x depends on y" when y already (transitively) depends on x
// through last: x → y → last → … → x.
func (g *Graph) cycle(x, y, last int) error {
	path := []Ref{g.refs[x], g.refs[y]}
	for n := last; n != -1; n = g.parent[n] {
		path = append(path, g.refs[n])
	}
	return &CycleError{Path: path}
}

// Remove deletes r and its edges.
func (g *Graph) Remove(r Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.ids[r]; ok {
		g.drop(id)
	}
}

// Dependencies returns what the tooling draws under r, sorted: what r depends on through
// Requires and Contains, and what refers to r through References (a Component's Release).
// Links gives what r depends on, whatever the link.
func (g *Graph) Dependencies(r Ref) []Ref {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, ok := g.ids[r]
	if !ok {
		return nil
	}
	set := map[int]struct{}{}
	for d, l := range g.deps[id] {
		if !l.Drawn() {
			set[d] = struct{}{}
		}
	}
	for d, l := range g.dependents[id] {
		if l.Drawn() {
			set[d] = struct{}{}
		}
	}
	return g.sorted(set)
}

// Dependents returns what depends on r directly, through any link, sorted (the tooling's
// "what depends on it"; a References edge is drawn both ways from its target: under it in
// Dependencies and here).
func (g *Graph) Dependents(r Ref) []Ref {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, ok := g.ids[r]
	if !ok {
		return nil
	}
	set := make(map[int]struct{}, len(g.dependents[id]))
	for d := range g.dependents[id] {
		set[d] = struct{}{}
	}
	return g.sorted(set)
}

// Links returns what r depends on, each with its link, sorted by Ref.
func (g *Graph) Links(r Ref) []Dep {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, ok := g.ids[r]
	if !ok {
		return nil
	}
	return g.sortedDeps(g.deps[id])
}

// DependentLinks returns what depends on r, each with the link it depends on r through,
// sorted by Ref.
func (g *Graph) DependentLinks(r Ref) []Dep {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, ok := g.ids[r]
	if !ok {
		return nil
	}
	return g.sortedDeps(g.dependents[id])
}

func (g *Graph) sorted(set map[int]struct{}) []Ref {
	out := make([]Ref, 0, len(set))
	for n := range set {
		out = append(out, g.refs[n])
	}
	slices.SortFunc(out, compareRefs)
	return out
}

func (g *Graph) sortedDeps(set map[int]Link) []Dep {
	out := make([]Dep, 0, len(set))
	for n, l := range set {
		out = append(out, Dep{Ref: g.refs[n], Link: l})
	}
	slices.SortFunc(out, func(a, b Dep) int { return compareRefs(a.Ref, b.Ref) })
	return out
}

// Order returns every object in provisioning order: each after everything it depends on.
func (g *Graph) Order() []Ref {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]int, 0, len(g.ids))
	for _, id := range g.ids {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return g.ord[ids[i]] < g.ord[ids[j]] })
	out := make([]Ref, len(ids))
	for i, id := range ids {
		out[i] = g.refs[id]
	}
	return out
}

// TeardownOrder returns root and everything that depends on it, directly or not, in the
// order to delete them: every object before what it depends on, root last. Contains edges
// are not followed (an aggregate is not deleted because a member is). Nil if root is not
// in the graph.
func (g *Graph) TeardownOrder(root Ref) []Ref {
	g.mu.Lock()
	defer g.mu.Unlock()
	rid, ok := g.ids[root]
	if !ok {
		return nil
	}
	seen := map[int]bool{rid: true}
	queue := []int{rid}
	for i := 0; i < len(queue); i++ {
		for w, l := range g.dependents[queue[i]] {
			if l.HoldsTeardown() && !seen[w] {
				seen[w] = true
				queue = append(queue, w)
			}
		}
	}
	sort.Slice(queue, func(i, j int) bool { return g.ord[queue[i]] > g.ord[queue[j]] })
	out := make([]Ref, len(queue))
	for i, id := range queue {
		out[i] = g.refs[id]
	}
	return out
}

// Blocking returns the direct dependencies of r that are not active (active reports whether
// an object is in phase Active; an object that does not exist is not), sorted, whatever
// their link. Empty means r may be provisioned. The engine uses Holding, which knows links.
func (g *Graph) Blocking(r Ref, active func(Ref) bool) []Ref {
	var out []Ref
	for _, d := range g.Links(r) {
		if !active(d.Ref) {
			out = append(out, d.Ref)
		}
	}
	return out
}

// Holding returns the direct dependencies of r that hold its reconcile, sorted: each
// through its link's Holds, given state (the object's phase and whether it exists).
func (g *Graph) Holding(r Ref, state func(Ref) (Phase, bool)) []Ref {
	var out []Ref
	for _, d := range g.Links(r) {
		phase, exists := state(d.Ref)
		if d.Link.Holds(exists, phase) {
			out = append(out, d.Ref)
		}
	}
	return out
}
