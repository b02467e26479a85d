package garbagecollector

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func idleSet(names ...string) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, n := range names {
		out = append(out, schema.GroupVersionResource{Group: n + ".example.com", Version: "v1", Resource: n})
	}
	return out
}

func resources(gvrs []schema.GroupVersionResource) []string {
	var out []string
	for _, r := range gvrs {
		out = append(out, r.Resource)
	}
	return out
}

// TestNextProbes: each period probes the next MaxIdleProbesPerPeriod idle resources in a
// stable order, wrapping around, whatever order the idle set comes in and whatever left it.
func TestNextProbes(t *testing.T) {
	gc := &GarbageCollector{o: Options{MaxIdleProbesPerPeriod: 3}}
	all := []string{"a", "b", "c", "d", "e", "f", "g"}
	for i, want := range [][]string{{"a", "b", "c"}, {"d", "e", "f"}, {"g", "a", "b"}, {"c", "d", "e"}} {
		idle := idleSet(all...)
		slices.Reverse(idle) // map order: any
		if got := resources(gc.nextProbes(idle)); !slices.Equal(got, want) {
			t.Fatalf("period %d: %v, want %v", i, got, want)
		}
	}
	// "e", the last probed, left the idle set (its resource got an object): carry on after it.
	if got := resources(gc.nextProbes(idleSet("a", "b", "c", "d", "f", "g"))); !slices.Equal(got, []string{"f", "g", "a"}) {
		t.Fatalf("after a removal: %v", got)
	}
	// No more than the bound: all of them, every period.
	if got := resources(gc.nextProbes(idleSet("x", "y"))); len(got) != 2 {
		t.Fatalf("small idle set: %v", got)
	}
	// Every resource is probed within ceil(n/bound) periods.
	gc = &GarbageCollector{o: Options{MaxIdleProbesPerPeriod: 300}}
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf("r%04d", i))
	}
	seen := map[string]bool{}
	for range (5000 + 299) / 300 {
		for _, r := range resources(gc.nextProbes(idleSet(many...))) {
			seen[r] = true
		}
	}
	if len(seen) != 5000 {
		t.Fatalf("%d of 5000 idle resources probed in 17 periods", len(seen))
	}
}
