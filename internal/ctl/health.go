package ctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

// ExitUnhealthy is health's exit status when an object is Failed or Stalled.
const ExitUnhealthy = 2

func newHealthCommand(e *env) *cobra.Command {
	var (
		all       bool
		kind      string
		output    string
		watchFlag bool
		interval  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "one row per lifecycle-managed kind: phases, Stalled and Failed, oldest Reconciling, reconcile p99 and error rate; exit 2 when anything is Failed or Stalled",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "", "wide", "json", "yaml"); err != nil {
				return err
			}
			if interval < 0 {
				return fmt.Errorf("--interval %s: want 0 or a positive duration", interval)
			}
			ctx := cmd.Context()
			list, note, err := e.health(ctx, all, kind)
			if err != nil {
				return err
			}
			if !watchFlag {
				if err := printHealth(e.streams.Out, list, note, output, time.Now()); err != nil {
					return err
				}
				if bad := Unhealthy(list); bad != "" {
					return &ExitError{Code: ExitUnhealthy, Msg: "unhealthy: " + bad}
				}
				return nil
			}
			// Follow the kinds' watches in the scope the answer covered: a redraw per burst of
			// changes, and every --interval for what no object change shows (reconcile p99
			// and errors, the event bus).
			first := true
			return e.watchKinds(ctx, list.Namespace, interval, func() error {
				list, note, err := e.health(ctx, all, kind)
				if err != nil {
					return err
				}
				if !first {
					fmt.Fprintln(e.streams.Out)
				}
				first = false
				return printHealth(e.streams.Out, list, note, output, time.Now())
			})
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace and the cluster-scoped kinds")
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind (Credential, credentials, ...)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "redraw whenever a lifecycle-managed object in the scope changes (exit status is not checked)")
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "with -w, also redraw this often for reconcile metrics and the event bus (0: only on changes)")
	return cmd
}

// health asks the ops API; with -A but no cluster-wide right it falls back to the current
// namespace and says so in note.
func (e *env) health(ctx context.Context, all bool, kind string) (*opsapi.HealthList, string, error) {
	c, err := e.ops()
	if err != nil {
		return nil, "", err
	}
	ns, err := e.namespace()
	if err != nil {
		return nil, "", err
	}
	get := func(namespace string) (*opsapi.HealthList, error) {
		req := c.Get().Resource(opsapi.ResourceHealths)
		if namespace != "" {
			req = req.Namespace(namespace)
		}
		if kind != "" {
			req = req.Param("kind", kind)
		}
		var l opsapi.HealthList
		if err := decode(req.Do(ctx), &l); err != nil {
			if apierrors.IsNotFound(err) && kind != "" {
				return nil, fmt.Errorf("the server doesn't have a lifecycle-managed resource type %q", kind)
			}
			return nil, err
		}
		return &l, nil
	}
	if !all {
		l, err := get(ns)
		return l, "", err
	}
	l, err := get("")
	if apierrors.IsForbidden(err) {
		note := fmt.Sprintf("cluster-wide health is hidden (you may not list %s.%s at the cluster scope); showing namespace %s",
			opsapi.ResourceHealths, opsapi.Group, ns)
		l, err = get(ns)
		if apierrors.IsForbidden(err) {
			return &opsapi.HealthList{Namespace: ns}, note + ": hidden too (you may not list " + opsapi.ResourceHealths + "." + opsapi.Group + " there either; pick a namespace with -n)", nil
		}
		return l, note, err
	}
	return l, "", err
}

// Unhealthy names the kinds with Failed or Stalled objects ("" when none).
func Unhealthy(l *opsapi.HealthList) string {
	var bad []string
	for _, k := range l.Items {
		if k.Failed > 0 || k.Stalled > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d failed, %d stalled", k.Kind, k.Failed, k.Stalled))
		}
	}
	return strings.Join(bad, "; ")
}

var healthPhases = []string{"Pending", "Reconciling", "Active", "Failed", "Deleting"}

func printHealth(w io.Writer, l *opsapi.HealthList, note, output string, now time.Time) error {
	if output == "json" || output == "yaml" {
		return printData(w, output, l)
	}
	cols := []column{{name: "KIND"}, {name: "TOTAL"}}
	for _, p := range healthPhases {
		cols = append(cols, column{name: strings.ToUpper(p)})
	}
	cols = append(cols, column{name: "STALLED"}, column{name: "OLDEST RECONCILING"}, column{name: "P99"}, column{name: "ERRORS"},
		column{name: "OBJECT", wide: true})
	var rows [][]any
	for _, k := range l.Items {
		row := []any{k.Kind, fmt.Sprint(k.Total)}
		for _, p := range healthPhases {
			row = append(row, fmt.Sprint(k.Phases[p]))
		}
		oldest, obj := "-", ""
		if k.ReconcilingSince != nil {
			oldest, obj = duration.HumanDuration(now.Sub(k.ReconcilingSince.Time)), k.OldestReconciling
		}
		p99 := "-"
		if k.ReconcileP99Seconds > 0 {
			p99 = (time.Duration(k.ReconcileP99Seconds * float64(time.Second))).String()
		}
		errRate := "-"
		if k.Reconciles > 0 {
			errRate = fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(k.Errors)/float64(k.Reconciles), k.Errors, k.Reconciles)
		}
		rows = append(rows, append(row, fmt.Sprint(k.Stalled), oldest, p99, errRate, obj))
	}
	if err := printTable(w, cols, rows, output == "wide"); err != nil {
		return err
	}
	bus := l.EventBus.Backend + ": healthy"
	if !l.EventBus.Healthy {
		bus = l.EventBus.Backend + ": UNAVAILABLE (" + l.EventBus.Error + ")"
	}
	scope := "namespace " + l.Namespace
	if l.Namespace == "" {
		scope = "all namespaces"
	}
	fmt.Fprintf(w, "\nscope: %s; event bus %s\n", scope, bus)
	hidden := append([]opsapi.HiddenKind(nil), l.Hidden...)
	sort.Slice(hidden, func(i, j int) bool { return hidden[i].Kind < hidden[j].Kind })
	for _, h := range hidden {
		fmt.Fprintf(w, "hidden: %s (%s)\n", h.Kind, h.Reason)
	}
	if note != "" {
		fmt.Fprintln(w, note)
	}
	return nil
}

// managedResources lists the kinds of the managed group the server serves.
func managedResources(e *env) ([]schema.GroupVersionKind, error) {
	dc, err := e.flags.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	list, err := dc.ServerResourcesForGroupVersion(ManagedGroup + "/v1alpha1")
	if err != nil {
		return nil, err
	}
	var out []schema.GroupVersionKind
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") {
			out = append(out, schema.GroupVersionKind{Group: ManagedGroup, Version: "v1alpha1", Kind: r.Kind})
		}
	}
	return out, nil
}
