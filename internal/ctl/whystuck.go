package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

// LifecycleFinalizer is the lifecycle engine's finalizer (pkg/lifecycle.Finalizer).
const LifecycleFinalizer = "kubeos.dev/lifecycle"

// FinalizerOwners says who removes each finalizer: the well-known ones by name, any other by
// the field manager that set it (metadata.managedFields), else "unknown".
func FinalizerOwners(kind string, finalizers []string, managed []metav1.ManagedFieldsEntry) map[string]string {
	out := map[string]string{}
	for _, f := range finalizers {
		switch f {
		case LifecycleFinalizer:
			out[f] = fmt.Sprintf("the lifecycle engine (controller lifecycle-%s): removed after the dependents are gone and Deprovision succeeds", strings.ToLower(kind))
		case metav1.FinalizerDeleteDependents:
			out[f] = "the garbage collector: removed once the owned objects are deleted (foreground deletion)"
		case metav1.FinalizerOrphanDependents:
			out[f] = "the garbage collector: removed once the owned objects are orphaned"
		case "kubernetes":
			out[f] = "the namespace controller"
		default:
			out[f] = "unknown: no field manager recorded setting it"
			if m := finalizerManager(f, managed); m != "" {
				out[f] = "set by field manager " + m + " (nothing in Kube removes it: the client that added it must)"
			}
		}
	}
	return out
}

// finalizerManager finds the manager whose managed fields hold finalizer f.
func finalizerManager(f string, managed []metav1.ManagedFieldsEntry) string {
	key := `v:` + mustJSON(f)
	for _, m := range managed {
		if m.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(m.FieldsV1.Raw, &fields) != nil {
			continue
		}
		md, _ := fields["f:metadata"].(map[string]any)
		fin, _ := md["f:finalizers"].(map[string]any)
		if _, ok := fin[key]; ok {
			return m.Manager
		}
	}
	return ""
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func newWhyStuckCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why-stuck KIND/NAME",
		Short: "why a deletion does not finish: remaining finalizers and their owners, dependents still there, time left before the deletion timeout, audit entries since",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := e.resolve(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			obj, err := e.get(ctx, t)
			if err != nil {
				return err
			}
			w := e.streams.Out
			ts := obj.GetDeletionTimestamp()
			if ts == nil {
				fmt.Fprintf(w, "%s is not being deleted (no deletionTimestamp).\n", t)
				return nil
			}
			now := time.Now()
			fmt.Fprintf(w, "%s: deletion requested %s ago (%s).\n", t, duration.HumanDuration(now.Sub(ts.Time)), ts.UTC().Format(time.RFC3339))
			fmt.Fprintln(w, "\nFinalizers:")
			owners := FinalizerOwners(t.kind, obj.GetFinalizers(), obj.GetManagedFields())
			if len(obj.GetFinalizers()) == 0 {
				fmt.Fprintln(w, "  none: the object goes as soon as the API server processes it")
			}
			for _, f := range obj.GetFinalizers() {
				fmt.Fprintf(w, "  %s: %s\n", f, owners[f])
			}
			if c := meta.FindStatusCondition(conditions(obj), "Terminating"); c != nil && c.Message != "" {
				fmt.Fprintf(w, "  engine: %s: %s\n", c.Reason, c.Message)
			}
			if c := meta.FindStatusCondition(conditions(obj), "Stalled"); c != nil && c.Status == metav1.ConditionTrue {
				fmt.Fprintf(w, "  Stalled: %s: %s\n", c.Reason, c.Message)
			}
			g, err := e.graph(ctx, t, opsapi.DirectionDependents, 1)
			if err != nil {
				return err
			}
			printDependents(w, g)
			for _, n := range g.Nodes {
				if n.ID == g.Root && n.DeletionTimeoutSeconds > 0 {
					left := ts.Add(time.Duration(n.DeletionTimeoutSeconds * float64(time.Second))).Sub(now)
					if left > 0 {
						fmt.Fprintf(w, "\nDeletion timeout: %s left (the kind's timeout is %s; then the object is marked Stalled)\n", left.Round(time.Second), time.Duration(n.DeletionTimeoutSeconds*float64(time.Second)))
					} else {
						fmt.Fprintf(w, "\nDeletion timeout: passed %s ago (timeout %s): the object is Stalled and still retried\n", (-left).Round(time.Second), time.Duration(n.DeletionTimeoutSeconds*float64(time.Second)))
					}
					if n.LastError != "" {
						fmt.Fprintf(w, "Last reconcile error: %s\n", n.LastError)
					}
				}
			}
			fmt.Fprintln(w, "\nAudit entries since deletion began (writes):")
			list, err := e.audit(ctx, auditFlags{uid: string(obj.GetUID()), since: ts.Time}, t.namespace)
			switch {
			case apierrors.IsServiceUnavailable(err):
				fmt.Fprintf(w, "  unavailable: %v\n", err)
				return nil
			case apierrors.IsForbidden(err):
				fmt.Fprintln(w, "  hidden: you may not read the audit log here")
				return nil
			case err != nil:
				return err
			}
			// Writes only: the reads of tools polling the object (this one too) are noise here.
			writes := list.Items[:0]
			for _, ev := range list.Items {
				switch ev.Verb {
				case "get", "list", "watch":
				default:
					writes = append(writes, ev)
				}
			}
			list.Items = writes
			return printAudit(w, list, "")
		},
	}
	return cmd
}

func printDependents(w io.Writer, g *opsapi.Graph) {
	fmt.Fprintln(w, "\nDependents still there:")
	var root opsapi.Node
	byID := map[string]opsapi.Node{}
	for _, n := range g.Nodes {
		byID[n.ID] = n
		if n.ID == g.Root {
			root = n
		}
	}
	var lines []string
	for _, id := range root.Edges {
		n := byID[id]
		if n.Missing {
			continue
		}
		if n.Hidden {
			lines = append(lines, fmt.Sprintf("  a %s in namespace %s you may not read", n.Kind, n.Namespace))
			continue
		}
		_, phase, reason, _ := Status(n)
		lines = append(lines, fmt.Sprintf("  %s  %s  %s", n.ID, phase, reason))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
