package ctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

// notReady reports whether n keeps what depends on it from being provisioned.
func notReady(n opsapi.Node) bool {
	ready, phase, _, _ := Status(n)
	return n.Hidden || n.Missing || ready != "True" || phase != "Active"
}

// blameRank orders blockers: a failed object explains more than a missing one, a missing
// one more than one the user cannot see, that more than one merely still working.
func blameRank(n opsapi.Node) int {
	_, phase, _, _ := Status(n)
	switch {
	case phase == "Failed":
		return 4
	case n.Missing:
		return 3
	case n.Hidden:
		return 2
	case phase == "Deleting":
		return 1
	}
	return 0
}

// Blame walks g (a dependencies walk) from its root through objects that are not Ready and
// returns the path to the deepest one: the blocker is the last element. A root that is Ready
// gives a path of one. Among several not-Ready dependencies the path to a Failed object wins,
// then to a missing one, a hidden one, a deleting one, then the longest.
func Blame(g *opsapi.Graph) []opsapi.Node {
	nodes := map[string]opsapi.Node{}
	for _, n := range g.Nodes {
		nodes[n.ID] = n
	}
	root, ok := nodes[g.Root]
	if !ok {
		return nil
	}
	onPath := map[string]bool{}
	var best func(n opsapi.Node) []opsapi.Node
	best = func(n opsapi.Node) []opsapi.Node {
		onPath[n.ID] = true
		defer delete(onPath, n.ID)
		var out []opsapi.Node
		for _, id := range n.Edges {
			c, ok := nodes[id]
			if !ok {
				c = opsapi.Node{ID: id, Missing: true}
				c.Kind, c.Namespace, c.Name = splitID(id)
			}
			if onPath[id] || !notReady(c) {
				continue
			}
			p := best(c)
			if out == nil || better(p, out) {
				out = p
			}
		}
		return append([]opsapi.Node{n}, out...)
	}
	if !notReady(root) {
		return []opsapi.Node{root}
	}
	return best(root)
}

func better(a, b []opsapi.Node) bool {
	ra, rb := blameRank(a[len(a)-1]), blameRank(b[len(b)-1])
	if ra != rb {
		return ra > rb
	}
	return len(a) > len(b)
}

func newWhyCommand(e *env) *cobra.Command {
	var events int
	cmd := &cobra.Command{
		Use:   "why KIND/NAME",
		Short: "why an object is not Active: the deepest object not Ready on its dependency path, its conditions, last error, next attempt and recent Events",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := e.resolve(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if _, err := e.get(ctx, t); err != nil {
				return err
			}
			g, err := e.graph(ctx, t, opsapi.DirectionDependencies, 0)
			if err != nil {
				return err
			}
			return e.printWhy(ctx, e.streams.Out, Blame(g), events, time.Now())
		},
	}
	cmd.Flags().IntVar(&events, "events", 5, "recent Events shown per object on the path")
	return cmd
}

func (e *env) printWhy(ctx context.Context, w io.Writer, path []opsapi.Node, maxEvents int, now time.Time) error {
	if len(path) == 0 {
		return fmt.Errorf("the server's graph has no root")
	}
	root := path[0]
	if len(path) == 1 && !notReady(root) {
		fmt.Fprintf(w, "%s is Active (Ready=True).\n", root.ID)
		return nil
	}
	blocker := path[len(path)-1]
	_, phase, reason, _ := Status(root)
	fmt.Fprintf(w, "%s is %s", root.ID, phase)
	if reason != "" {
		fmt.Fprintf(w, " (%s)", reason)
	}
	if len(path) > 1 {
		fmt.Fprintf(w, ": blocked by %s", blocker.ID)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintln(w, "\nPath:")
	for i, n := range path {
		_, phase, reason, msg := Status(n)
		label := n.ID
		if n.Hidden {
			label = fmt.Sprintf("%s in namespace %s (hidden: you may not read it)", n.Kind, n.Namespace)
		}
		fmt.Fprintf(w, "  %s%s  %s", strings.Repeat("  ", i), label, phase)
		if reason != "" {
			fmt.Fprintf(w, "  %s", reason)
		}
		if msg != "" {
			fmt.Fprintf(w, ": %s", msg)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nBlocker: %s\n", blocker.ID)
	switch {
	case blocker.Missing:
		fmt.Fprintf(w, "  It does not exist. %s names it as a dependency (spec.dependsOn or a reference); create it or remove the reference.\n", path[len(path)-2].ID)
	case blocker.Hidden:
		fmt.Fprintln(w, "  You may not read it; ask someone who can to run `kube ctl why` on it.")
	default:
		_, phase, _, _ := Status(blocker)
		fmt.Fprintf(w, "  Phase: %s\n  Conditions:\n", phase)
		for _, c := range blocker.Conditions {
			fmt.Fprintf(w, "    %s=%s  %s", c.Type, c.Status, c.Reason)
			if c.Message != "" {
				fmt.Fprintf(w, ": %s", c.Message)
			}
			fmt.Fprintf(w, "  (%s ago)\n", duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)))
		}
		if blocker.LastError != "" {
			fmt.Fprintf(w, "  Last reconcile error: %s\n", blocker.LastError)
		} else if blocker.LastReconcile != nil {
			fmt.Fprintf(w, "  Last reconcile: %s ago, no error\n", duration.HumanDuration(now.Sub(blocker.LastReconcile.Time)))
		}
		fmt.Fprintf(w, "  Next attempt: %s\n", nextAttempt(blocker, now))
	}
	if maxEvents > 0 {
		fmt.Fprintln(w, "\nEvents:")
		for _, n := range path {
			if n.Hidden || n.Missing {
				continue
			}
			e.printEvents(ctx, w, n, maxEvents, now)
		}
	}
	return nil
}

func nextAttempt(n opsapi.Node, now time.Time) string {
	switch {
	case n.NextAttempt != nil && n.NextAttempt.After(now):
		return fmt.Sprintf("in %s (%s)", n.NextAttempt.Sub(now).Round(time.Second), n.NextAttempt.UTC().Format(time.RFC3339))
	case n.NextAttempt != nil:
		return "due now"
	case n.LastReconcile == nil:
		return "unknown (this server does not run the engine's controllers, or has not reconciled it yet)"
	}
	return "none scheduled: a change to the object or to what it depends on wakes it"
}

// printEvents prints the newest max Events about n (events.k8s.io/v1, with the user's rights).
func (e *env) printEvents(ctx context.Context, w io.Writer, n opsapi.Node, max int, now time.Time) {
	cfg, err := e.config()
	if err != nil {
		fmt.Fprintf(w, "  %s: %v\n", n.ID, err)
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(w, "  %s: %v\n", n.ID, err)
		return
	}
	ns := n.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // events of cluster-scoped objects
	}
	list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		fmt.Fprintf(w, "  %s: hidden (you may not list events in namespace %s)\n", n.ID, ns)
		return
	}
	if err != nil {
		fmt.Fprintf(w, "  %s: %v\n", n.ID, err)
		return
	}
	var mine []eventsv1.Event
	for _, ev := range list.Items {
		r := ev.Regarding
		if (n.UID != "" && string(r.UID) == n.UID) || (r.UID == "" && r.Kind == n.Kind && r.Name == n.Name && r.Namespace == n.Namespace) {
			mine = append(mine, ev)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return eventTime(mine[i]).Before(eventTime(mine[j])) })
	if len(mine) > max {
		mine = mine[len(mine)-max:]
	}
	if len(mine) == 0 {
		fmt.Fprintf(w, "  %s: none\n", n.ID)
		return
	}
	fmt.Fprintf(w, "  %s:\n", n.ID)
	for _, ev := range mine {
		fmt.Fprintf(w, "    %s ago  %s  %s  %s\n", duration.HumanDuration(now.Sub(eventTime(ev))), ev.Type, ev.Reason, ev.Note)
	}
}

func eventTime(ev eventsv1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case ev.Series != nil:
		return ev.Series.LastObservedTime.Time
	case !ev.DeprecatedLastTimestamp.IsZero():
		return ev.DeprecatedLastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}
