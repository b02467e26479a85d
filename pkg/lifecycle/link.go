package lifecycle

import (
	"slices"
	"strconv"
)

// Link is what an edge "A depends on B" of the [Graph] asks of the engine. Every link
// orders provisioning (B before A), takes part in the cycle check and is drawn by the
// operator tooling; they differ in what holds A's reconcile and in the teardown order:
//
//	link        declared by               A's reconcile is held while B   teardown
//	Requires    KindOptions.Dependencies  is not Active                   A before B (B's finalizer waits for A)
//	References  KindOptions.References    does not exist                  A before B (B's finalizer waits for A)
//	Contains    KindOptions.Members       is not Active                   B before A (A's finalizer waits for B; B does not wait for A)
//
// References is the ordering-only dependency: a Release and the Component it rolls (the
// Component is Reconciling for the whole rollout the Release drives, so holding the
// Release on its phase would stop it). The tooling draws a reference under what it refers
// to (Graph.Dependencies of the Component lists its Release), as it is not something A
// waits for. Contains is an aggregate and its members: an Application is Ready when its
// Components are, and its deletion deletes them first.
type Link uint8

// The links.
const (
	Requires Link = iota
	References
	Contains
)

func (l Link) String() string {
	switch l {
	case Requires:
		return "Requires"
	case References:
		return "References"
	case Contains:
		return "Contains"
	}
	return "Link(" + strconv.Itoa(int(l)) + ")"
}

// Holds reports whether a dependency reached through l holds its dependent's reconcile,
// given whether the dependency exists and its phase (DependenciesReady=False naming it).
func (l Link) Holds(exists bool, phase Phase) bool {
	if l == References {
		return !exists
	}
	return !exists || phase != PhaseActive
}

// HoldsTeardown reports whether the dependency's deletion waits until the dependent is
// gone (false for Contains: the member goes first, its aggregate after it).
func (l Link) HoldsTeardown() bool { return l != Contains }

// HoldsDependentTeardown reports whether the dependent's deletion waits, after its own
// Deprovision, until the dependency is gone (Contains: the aggregate outlives its members).
func (l Link) HoldsDependentTeardown() bool { return l == Contains }

// Drawn reports whether the tooling draws the edge from the dependency to the dependent
// (a reference under what it refers to) rather than from the dependent to the dependency.
func (l Link) Drawn() bool { return l == References }

// Dep is one dependency with its link.
type Dep struct {
	Ref
	Link Link
}

// Deps gives each of refs the link l.
func Deps(l Link, refs ...Ref) []Dep {
	out := make([]Dep, len(refs))
	for i, r := range refs {
		out[i] = Dep{Ref: r, Link: l}
	}
	return out
}

// refsOf lists the Refs of deps.
func refsOf(deps []Dep) []Ref {
	out := make([]Ref, len(deps))
	for i, d := range deps {
		out[i] = d.Ref
	}
	return out
}

// mergeDeps joins a kind's Requires, References and Contains lists into one per target:
// a target named twice keeps the strongest link (Requires over Contains over References),
// so a Dependency named again as a Reference still waits for Active.
func mergeDeps(requires, references, members []Ref) []Dep {
	rank := map[Link]int{Requires: 3, Contains: 2, References: 1}
	idx := map[Ref]int{}
	var out []Dep
	add := func(l Link, refs []Ref) {
		for _, r := range refs {
			if i, ok := idx[r]; ok {
				if rank[l] > rank[out[i].Link] {
					out[i].Link = l
				}
				continue
			}
			idx[r] = len(out)
			out = append(out, Dep{Ref: r, Link: l})
		}
	}
	add(Requires, requires)
	add(Contains, members)
	add(References, references)
	slices.SortStableFunc(out, func(a, b Dep) int { return compareRefs(a.Ref, b.Ref) })
	return out
}
