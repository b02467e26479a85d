package ctl

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

func jsonUnmarshal(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode the server's answer: %w", err)
	}
	return nil
}

// TreeRow is one line of a tree.
type TreeRow struct {
	// Prefix is the drawing ("├─", "│ └─") before the name.
	Prefix string
	Node   opsapi.Node
	// Note marks a line that is not the object's first: "back-reference", "cycle", or
	// "depth limit" for a truncated walk.
	Note string
}

// Tree lays g out as a tree from its root: each object's children in its Edges order, an
// object reached again printed once more only as a back-reference (never its subtree), an
// edge back into the current path as a cycle (the engine keeps the graph acyclic; this keeps
// the walk finite whatever the server sends).
func Tree(g *opsapi.Graph) []TreeRow {
	nodes := make(map[string]opsapi.Node, len(g.Nodes))
	for _, n := range g.Nodes {
		nodes[n.ID] = n
	}
	var rows []TreeRow
	printed := map[string]bool{}
	onPath := map[string]bool{}
	var walk func(id, indent string, last, top bool)
	walk = func(id, indent string, last, top bool) {
		n, ok := nodes[id]
		if !ok {
			n = opsapi.Node{ID: id, Missing: true}
			n.Kind, n.Namespace, n.Name = splitID(id)
		}
		prefix, childIndent := "", ""
		if !top {
			if last {
				prefix, childIndent = indent+"└─", indent+"  "
			} else {
				prefix, childIndent = indent+"├─", indent+"│ "
			}
		}
		switch {
		case onPath[id]:
			rows = append(rows, TreeRow{Prefix: prefix, Node: n, Note: "cycle"})
			return
		case printed[id]:
			rows = append(rows, TreeRow{Prefix: prefix, Node: n, Note: "back-reference"})
			return
		}
		printed[id] = true
		rows = append(rows, TreeRow{Prefix: prefix, Node: n})
		onPath[id] = true
		for i, c := range n.Edges {
			walk(c, childIndent, i == len(n.Edges)-1, false)
		}
		onPath[id] = false
	}
	walk(g.Root, "", true, true)
	return rows
}

// splitID parses Kind/namespace/name or Kind/name.
func splitID(id string) (kind, namespace, name string) {
	parts := strings.SplitN(id, "/", 3)
	switch len(parts) {
	case 3:
		return parts[0], parts[1], parts[2]
	case 2:
		return parts[0], "", parts[1]
	}
	return "", "", id
}

// Status is a node's READY, PHASE and REASON columns and its message.
func Status(n opsapi.Node) (ready, phase, reason, message string) {
	switch {
	case n.Hidden:
		return "-", "Hidden", "Forbidden", "you may not read this object"
	case n.Missing:
		return "-", "Missing", "NotFound", "the object does not exist"
	}
	ready, phase = "Unknown", n.Phase
	if c := meta.FindStatusCondition(n.Conditions, "Ready"); c != nil {
		ready, reason, message = string(c.Status), c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(n.Conditions, "Stalled"); c != nil && c.Status == metav1.ConditionTrue {
		reason, message = c.Reason, c.Message
	}
	if n.DeletionTimestamp != nil {
		phase = "Deleting"
		if len(n.Finalizers) > 0 {
			reason = "Finalizers: " + strings.Join(n.Finalizers, ",")
		}
		if c := meta.FindStatusCondition(n.Conditions, "Terminating"); c != nil && c.Message != "" {
			message = c.Message
		}
	}
	if phase == "" {
		phase = "Pending"
	}
	return ready, phase, reason, message
}

// Age is kubectl's AGE column.
func Age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// displayName is NAME in a tree: namespace/name when the namespace differs from the root's.
func displayName(n opsapi.Node, rootNS string) string {
	if n.Hidden {
		return "(hidden)"
	}
	if n.Namespace != "" && n.Namespace != rootNS {
		return n.Namespace + "/" + n.Name
	}
	return n.Name
}

// Dot renders g for Graphviz: nodes coloured by phase, missing dependencies dashed, hidden
// ones grey; edges point from dependent to dependency whatever the walk's direction.
func Dot(g *opsapi.Graph) string {
	var b strings.Builder
	b.WriteString("digraph kube {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"sans-serif\"];\n")
	ids := make([]string, 0, len(g.Nodes))
	byID := map[string]opsapi.Node{}
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
		byID[n.ID] = n
	}
	sort.Strings(ids)
	colours := map[string]string{"Active": "palegreen", "Pending": "lightyellow", "Reconciling": "lightblue",
		"Failed": "salmon", "Deleting": "orange", "Missing": "white", "Hidden": "lightgrey"}
	for _, id := range ids {
		n := byID[id]
		_, phase, reason, _ := Status(n)
		style := ""
		if n.Missing {
			style = `, style="dashed"`
		}
		label := n.Kind + "\\n" + displayName(n, "") + "\\n" + phase
		if reason != "" {
			label += " (" + reason + ")"
		}
		fmt.Fprintf(&b, "  %q [label=%q, fillcolor=%q%s];\n", id, label, colours[phase], style)
	}
	for _, id := range ids {
		for _, to := range byID[id].Edges {
			from, dst := id, to
			if g.Direction == opsapi.DirectionDependents {
				from, dst = to, id
			}
			fmt.Fprintf(&b, "  %q -> %q;\n", from, dst)
		}
	}
	b.WriteString("}\n")
	// Labels were built with %q; Graphviz wants \n kept literally, which %q doubled.
	return strings.ReplaceAll(b.String(), `\\n`, `\n`)
}
