package ctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

func newTreeCommand(e *env) *cobra.Command {
	var (
		dependents bool
		depth      int
		output     string
		watchFlag  bool
	)
	cmd := &cobra.Command{
		Use:   "tree KIND/NAME",
		Short: "the dependency tree of one object (-D: what depends on it)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "wide", "json", "yaml", "dot"); err != nil {
				return err
			}
			if depth < 0 {
				return fmt.Errorf("--depth %d: want 0 (no limit) or more", depth)
			}
			t, err := e.resolve(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if _, err := e.get(ctx, t); err != nil {
				return err
			}
			dir := opsapi.DirectionDependencies
			if dependents {
				dir = opsapi.DirectionDependents
			}
			draw := func() error {
				g, err := e.graph(ctx, t, dir, depth)
				if err != nil {
					return err
				}
				return printGraph(e.streams.Out, g, t.namespace, output, time.Now())
			}
			if !watchFlag {
				return draw()
			}
			first := true
			return e.watchKinds(ctx, t.namespace, 0, func() error {
				if !first {
					fmt.Fprintln(e.streams.Out)
				}
				first = false
				return draw()
			})
		},
	}
	cmd.Flags().BoolVarP(&dependents, "dependents", "D", false, "show what depends on the object instead of what it depends on")
	cmd.Flags().IntVar(&depth, "depth", 0, "levels to walk (0: all)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or dot (Graphviz)")
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "redraw whenever a lifecycle-managed object changes")
	return cmd
}

// printGraph prints g as a table tree, JSON, YAML or Graphviz dot.
func printGraph(w io.Writer, g *opsapi.Graph, rootNS, output string, now time.Time) error {
	switch output {
	case "json", "yaml":
		return printData(w, output, g)
	case "dot":
		_, err := io.WriteString(w, Dot(g))
		return err
	}
	cols := []column{{name: "NAME"}, {name: "KIND"}, {name: "READY"}, {name: "PHASE"}, {name: "REASON"}, {name: "AGE"}, {name: "MESSAGE", wide: true}}
	var rows [][]any
	for _, r := range Tree(g) {
		n := r.Node
		ready, phase, reason, msg := Status(n)
		name := r.Prefix + displayName(n, rootNS)
		switch r.Note {
		case "back-reference":
			name += " (↑ shown above)"
			ready, phase, reason, msg = "", "", "", ""
		case "cycle":
			name += " (↻ cycle)"
			reason = "DependencyCycle"
		}
		if n.Truncated && r.Note == "" {
			msg = "(deeper dependencies not shown: --depth) " + msg
		}
		age := Age(n.CreationTimestamp, now)
		if n.Missing || n.Hidden || r.Note != "" {
			age = ""
		}
		rows = append(rows, []any{name, n.Kind, ready, phase, reason, age, msg})
	}
	if err := printTable(w, cols, rows, output == "wide"); err != nil {
		return err
	}
	if g.Hidden > 0 {
		fmt.Fprintf(w, "%d object(s) hidden: you may not read them\n", g.Hidden)
	}
	return nil
}

// watchKinds draws once, then again after every change to a lifecycle-managed object in
// namespace ("": all, and the cluster-scoped kinds), at most every 200 ms, and at least every
// refresh (0: only on changes), until ctx ends. Each kind's watch starts at the
// resourceVersion of a one-item list read before the first draw (nothing between the two is
// missed, and there is no initial ADDED event per existing object, whatever the kind's
// size); it resumes from the last version it saw, and an expired version re-lists and
// redraws.
func (e *env) watchKinds(ctx context.Context, namespace string, refresh time.Duration, redraw func() error) error {
	dc, err := e.dynamic()
	if err != nil {
		return err
	}
	m, err := e.flags.ToRESTMapper()
	if err != nil {
		return err
	}
	changes := make(chan struct{}, 1)
	changed := func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	kinds, err := managedResources(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := 0
	for _, k := range kinds {
		mapping, err := m.RESTMapping(k.GroupKind())
		if err != nil {
			continue
		}
		ri := dc.Resource(mapping.Resource)
		var lister interface {
			List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error)
			Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
		} = ri
		if mapping.Scope.Name() == "namespace" && namespace != "" {
			lister = ri.Namespace(namespace)
		}
		// May the user watch it here? One list of one item says, and gives the version to
		// watch from.
		l, err := lister.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			continue // not allowed to read it: its changes are not shown live
		}
		started++
		go func(rv string) {
			backoff := time.Second
			for ctx.Err() == nil {
				w, err := lister.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
				if err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(backoff):
					}
					backoff = min(2*backoff, 30*time.Second)
					continue
				}
				backoff = time.Second
				expired := false
				for ev := range w.ResultChan() {
					if ev.Type == watch.Error {
						expired = true
						continue
					}
					if o, ok := ev.Object.(*unstructured.Unstructured); ok && o.GetResourceVersion() != "" {
						rv = o.GetResourceVersion()
					}
					if ev.Type != watch.Bookmark {
						changed()
					}
				}
				w.Stop()
				if expired {
					if l, err := lister.List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
						rv = l.GetResourceVersion()
						changed() // what happened meanwhile is unknown
					}
				}
			}
		}(l.GetResourceVersion())
	}
	if started == 0 {
		return fmt.Errorf("--watch: you may not watch any lifecycle-managed kind here")
	}
	if err := redraw(); err != nil {
		return err
	}
	var tick <-chan time.Time
	if refresh > 0 {
		t := time.NewTicker(refresh)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-changes:
			select { // coalesce a burst into one redraw
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
			select {
			case <-changes:
			default:
			}
		}
		if err := redraw(); err != nil {
			return err
		}
	}
}
