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
			if err := draw(); err != nil {
				return err
			}
			if !watchFlag {
				return nil
			}
			return e.watchKinds(ctx, t.namespace, func() error {
				fmt.Fprintln(e.streams.Out)
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

// watchKinds calls redraw after every change to a lifecycle-managed object in namespace (and
// the cluster-scoped kinds), at most every 200 ms, until ctx ends.
func (e *env) watchKinds(ctx context.Context, namespace string, redraw func() error) error {
	dc, err := e.dynamic()
	if err != nil {
		return err
	}
	m, err := e.flags.ToRESTMapper()
	if err != nil {
		return err
	}
	changes := make(chan struct{}, 1)
	kinds, err := managedResources(e)
	if err != nil {
		return err
	}
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
		// May the user watch it here? One list of one item says.
		if _, err := lister.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			continue // not allowed to read it: its changes are not shown live
		}
		started++
		go func() {
			for ctx.Err() == nil {
				// From the current state (its ADDED events cost one redraw), again whenever
				// the server ends the watch.
				w, err := lister.Watch(ctx, metav1.ListOptions{})
				if err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
					continue
				}
				for range w.ResultChan() {
					select {
					case changes <- struct{}{}:
					default:
					}
				}
				w.Stop()
			}
		}()
	}
	if started == 0 {
		return fmt.Errorf("--watch: you may not watch any lifecycle-managed kind here")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
			time.Sleep(200 * time.Millisecond) // coalesce a burst into one redraw
			select {
			case <-changes:
			default:
			}
			if err := redraw(); err != nil {
				return err
			}
		}
	}
}
