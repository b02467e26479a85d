package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

type auditFlags struct {
	uid, operator, phase, user string
	since                      time.Time
	limit                      int
}

func newAuditCommand(e *env) *cobra.Command {
	var (
		f      auditFlags
		since  time.Duration
		all    bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "query the server's audit log (entries about objects you may read)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "", "wide", "json", "yaml"); err != nil {
				return err
			}
			if since < 0 {
				return fmt.Errorf("--since %s: want a positive duration", since)
			}
			if since > 0 {
				f.since = time.Now().Add(-since)
			}
			ns := ""
			if !all {
				var err error
				if ns, err = e.namespace(); err != nil {
					return err
				}
			}
			list, err := e.audit(cmd.Context(), f, ns)
			if err != nil {
				return err
			}
			return printAudit(e.streams.Out, list, output)
		},
	}
	cmd.Flags().StringVar(&f.uid, "uid", "", "entries about the object with this UID")
	cmd.Flags().StringVar(&f.operator, "operator", "", "entries whose acting operator (lifecycle.kubeos.dev/operator) is this")
	cmd.Flags().StringVar(&f.phase, "phase", "", "entries whose request left the object in this lifecycle phase")
	cmd.Flags().StringVar(&f.user, "user", "", "entries of requests by (or impersonating) this user")
	cmd.Flags().DurationVar(&since, "since", 0, "only entries newer than this (1h, 10m)")
	cmd.Flags().IntVar(&f.limit, "limit", 500, "at most this many (the newest)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "entries of every namespace and of cluster-scoped objects (needs list auditevents.ops.kubeos.dev at the cluster scope)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

// audit queries the ops API; namespace "" is the cluster scope.
func (e *env) audit(ctx context.Context, f auditFlags, namespace string) (*opsapi.AuditList, error) {
	c, err := e.ops()
	if err != nil {
		return nil, err
	}
	req := c.Get().Resource(opsapi.ResourceAuditEvents)
	if namespace != "" {
		req = req.Namespace(namespace)
	}
	for k, v := range map[string]string{"uid": f.uid, "operator": f.operator, "phase": f.phase, "user": f.user} {
		if v != "" {
			req = req.Param(k, v)
		}
	}
	if !f.since.IsZero() {
		req = req.Param("since", f.since.UTC().Format(time.RFC3339))
	}
	if f.limit > 0 {
		req = req.Param("limit", fmt.Sprint(f.limit))
	}
	var l opsapi.AuditList
	if err := decode(req.Do(ctx), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

func printAudit(w io.Writer, l *opsapi.AuditList, output string) error {
	if output == "json" || output == "yaml" {
		return printData(w, output, l)
	}
	cols := []column{{name: "TIME"}, {name: "USER"}, {name: "VERB"}, {name: "OBJECT"}, {name: "CODE"}, {name: "OPERATOR"}, {name: "PHASE"},
		{name: "UID", wide: true}, {name: "TRACE", wide: true}}
	var rows [][]any
	for _, ev := range l.Items {
		obj := ""
		uid := ""
		if r := ev.ObjectRef; r != nil {
			res := r.Resource
			if r.APIGroup != "" {
				res += "." + r.APIGroup
			}
			if r.Subresource != "" {
				res += "/" + r.Subresource
			}
			parts := []string{res}
			if r.Namespace != "" {
				parts = append(parts, r.Namespace)
			}
			if r.Name != "" {
				parts = append(parts, r.Name)
			}
			obj, uid = strings.Join(parts, "/"), string(r.UID)
		}
		code := ""
		if ev.ResponseStatus != nil {
			code = fmt.Sprint(ev.ResponseStatus.Code)
		}
		user := ev.User.Username
		if ev.ImpersonatedUser != nil {
			user += " as " + ev.ImpersonatedUser.Username
		}
		rows = append(rows, []any{ev.StageTimestamp.UTC().Format(time.RFC3339), user, ev.Verb, obj, code,
			ev.Annotations["lifecycle.kubeos.dev/operator"], ev.Annotations["lifecycle.kubeos.dev/phase"], uid,
			ev.Annotations["lifecycle.kubeos.dev/trace-id"]})
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "  no entries")
	} else if err := printTable(w, cols, rows, output == "wide"); err != nil {
		return err
	}
	if l.Truncated {
		fmt.Fprintln(w, "(older entries left out: --limit)")
	}
	if l.Hidden > 0 {
		fmt.Fprintf(w, "%d entries hidden: about objects you may not read\n", l.Hidden)
	}
	return nil
}
