package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// platformGraph builds n objects shaped like the platform kinds: 1 % Tenants, everything
// else depends on its Tenant, and a quarter of those also on one or two other objects of the
// same tenant (a Certificate on its issuer), created in random order (as informers deliver).
func platformGraph(b *testing.B, n int, rng *rand.Rand) (*Graph, []Ref) {
	g := NewGraph()
	tenants := n / 100
	refs := make([]Ref, n)
	for i := range refs {
		if i < tenants {
			refs[i] = Ref{Kind: "Tenant", Name: fmt.Sprint("t", i)}
		} else {
			refs[i] = Ref{Kind: "Credential", Namespace: fmt.Sprint("t", i%tenants), Name: fmt.Sprint("c", i)}
		}
	}
	perm := rng.Perm(n)
	for _, i := range perm {
		if i < tenants {
			must(b, g.AddEdges(refs[i]))
			continue
		}
		deps := []Ref{refs[i%tenants]}
		if rng.IntN(4) == 0 {
			for k := 0; k < 1+rng.IntN(2); k++ {
				j := tenants + (i%tenants + tenants*rng.IntN((n-tenants)/tenants)) // same tenant
				if j < i && j < n {
					deps = append(deps, refs[j]) // lower index only: acyclic
				}
			}
		}
		must(b, g.AddEdges(refs[i], deps...))
	}
	return g, refs
}

// randomDAG builds n objects and 3n edges that follow a hidden order, inserted in random
// order, so the graph's own order must be repaired often: a harder case than the platform.
func randomDAG(b *testing.B, n int, rng *rand.Rand) (*Graph, []Ref) {
	g := NewGraph()
	refs := make([]Ref, n)
	for i := range refs {
		refs[i] = ref(fmt.Sprint(i))
	}
	type e struct{ from, to int }
	edges := make([]e, 0, 3*n)
	for len(edges) < 3*n {
		a, c := rng.IntN(n), rng.IntN(n)
		if a == c {
			continue
		}
		edges = append(edges, e{max(a, c), min(a, c)}) // higher depends on lower
	}
	rng.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	for _, x := range edges {
		must(b, g.AddEdges(refs[x.from], refs[x.to]))
	}
	return g, refs
}

// benchmarkCheck times Graph.Check (the admission question: would these dependencies close a
// cycle?) of a random object against two random others, and reports the latency percentiles.
func benchmarkCheck(b *testing.B, build func(*testing.B, int, *rand.Rand) (*Graph, []Ref)) {
	const n = 10000
	rng := rand.New(rand.NewPCG(7, 11))
	g, refs := build(b, n, rng)
	lat := make([]time.Duration, 0, b.N)
	cycles := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from := refs[rng.IntN(n)]
		deps := append(g.Dependencies(from), refs[rng.IntN(n)], refs[rng.IntN(n)])
		start := time.Now()
		if g.Check(from, deps) != nil {
			cycles++
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.5), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	b.ReportMetric(float64(cycles)/float64(b.N), "cycle-fraction")
}

func BenchmarkCycleCheck10kPlatform(b *testing.B)  { benchmarkCheck(b, platformGraph) }
func BenchmarkCycleCheck10kRandomDAG(b *testing.B) { benchmarkCheck(b, randomDAG) }

// BenchmarkBuild10kRandomDAG is the cost of building the random DAG edge by edge (30,000
// incremental checks).
func BenchmarkBuild10kRandomDAG(b *testing.B) {
	for i := 0; i < b.N; i++ {
		randomDAG(b, 10000, rand.New(rand.NewPCG(uint64(i), 3)))
	}
}

// BenchmarkAddEdge10kRandomDAG times AddEdges (the informer path: check and reorder) of one
// random edge into the 10,000-object random DAG; the edge is taken out again untimed.
func BenchmarkAddEdge10kRandomDAG(b *testing.B) {
	const n = 10000
	rng := rand.New(rand.NewPCG(7, 11))
	g, refs := randomDAG(b, n, rng)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from, to := refs[rng.IntN(n)], refs[rng.IntN(n)]
		old := g.Dependencies(from)
		start := time.Now()
		err := g.AddEdges(from, to)
		lat = append(lat, time.Since(start))
		if err == nil {
			b.StopTimer()
			must(b, g.SetDependencies(from, old))
			b.StartTimer()
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.5), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}
