package scheduler

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/node/topology"
)

// nodeTree orders nodes as upstream's node tree does: zones in the order they first
// appeared, nodes within a zone in the order they were added, and the list taking one node
// from each zone in turn, so that a cycle that stops after enough feasible nodes has seen
// every zone.
type nodeTree struct {
	zones  []string
	byZone map[string][]string
	zoneOf map[string]string
}

func newNodeTree() nodeTree {
	return nodeTree{byZone: map[string][]string{}, zoneOf: map[string]string{}}
}

// set adds node or moves it to its zone; it reports whether the order changed.
func (t *nodeTree) set(node *v1.Node) bool {
	zone := topology.GetZoneKey(node)
	if old, ok := t.zoneOf[node.Name]; ok {
		if old == zone {
			return false
		}
		t.remove(node.Name)
	}
	if _, ok := t.byZone[zone]; !ok {
		t.zones = append(t.zones, zone)
	}
	t.byZone[zone] = append(t.byZone[zone], node.Name)
	t.zoneOf[node.Name] = zone
	return true
}

func (t *nodeTree) remove(name string) {
	zone, ok := t.zoneOf[name]
	if !ok {
		return
	}
	delete(t.zoneOf, name)
	names := t.byZone[zone]
	if i := slices.Index(names, name); i >= 0 {
		names = slices.Delete(names, i, i+1)
	}
	if len(names) == 0 {
		delete(t.byZone, zone)
		t.zones = slices.DeleteFunc(t.zones, func(z string) bool { return z == zone })
		return
	}
	t.byZone[zone] = names
}

// list is the round-robin over zones.
func (t *nodeTree) list() []string {
	out := make([]string, 0, len(t.zoneOf))
	for i := 0; len(out) < len(t.zoneOf); i++ {
		for _, z := range t.zones {
			if names := t.byZone[z]; i < len(names) {
				out = append(out, names[i])
			}
		}
	}
	return out
}
