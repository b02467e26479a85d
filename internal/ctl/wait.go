package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Verdict is what one look at an object says about a wait for Active.
type Verdict struct {
	// Done: Active and Ready. Failed: it will not get there without a change (Stalled,
	// Failed, or being deleted); Reason says why. Neither: keep waiting.
	Done, Failed bool
	Reason       string
}

// JudgeActive decides a wait --for=active on obj (kstatus semantics: Stalled=True is
// terminal; a status older than the spec is not yet an answer).
func JudgeActive(obj *unstructured.Unstructured) Verdict {
	conds := conditions(obj)
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	current := observed == 0 || observed >= obj.GetGeneration()
	if obj.GetDeletionTimestamp() != nil {
		return Verdict{Failed: true, Reason: "it is being deleted"}
	}
	if c := meta.FindStatusCondition(conds, "Stalled"); c != nil && c.Status == metav1.ConditionTrue && current {
		return Verdict{Failed: true, Reason: fmt.Sprintf("Stalled: %s: %s", c.Reason, c.Message)}
	}
	if phase == "Failed" && current {
		return Verdict{Failed: true, Reason: "phase Failed" + condSuffix(conds)}
	}
	if phase == "Active" && current && meta.IsStatusConditionTrue(conds, "Ready") {
		return Verdict{Done: true}
	}
	if phase == "" {
		phase = "Pending"
	}
	return Verdict{Reason: "phase " + phase + condSuffix(conds)}
}

func condSuffix(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, "Ready"); c != nil && c.Reason != "" {
		s := " (" + c.Reason
		if c.Message != "" {
			s += ": " + c.Message
		}
		return s + ")"
	}
	return ""
}

// conditions reads status.conditions (malformed entries skipped).
func conditions(obj *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

func newWaitCommand(e *env) *cobra.Command {
	var (
		forFlag string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait KIND/NAME --for=active",
		Short: "wait until an object is Active; fail at once, with the reason, when it goes Stalled or Failed",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if forFlag != "active" {
				return fmt.Errorf("--for=%s: only --for=active is supported", forFlag)
			}
			t, err := e.resolve(args)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			v, err := e.waitActive(ctx, t)
			switch {
			case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
				return &ExitError{Code: 1, Msg: fmt.Sprintf("error: timed out waiting for %s to be Active: %s", t, v.Reason)}
			case err != nil:
				return err
			case v.Failed:
				return &ExitError{Code: 1, Msg: fmt.Sprintf("error: %s will not become Active: %s", t, v.Reason)}
			}
			fmt.Fprintf(e.streams.Out, "%s condition met\n", t)
			return nil
		},
	}
	cmd.Flags().StringVar(&forFlag, "for", "active", "the state to wait for: active")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// waitActive watches t until JudgeActive is Done or Failed; it returns the last verdict.
func (e *env) waitActive(ctx context.Context, t target) (Verdict, error) {
	dc, err := e.dynamic()
	if err != nil {
		return Verdict{}, err
	}
	ri := dc.Resource(t.gvr)
	var res interface {
		Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
		Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	} = ri
	if t.namespaced {
		res = ri.Namespace(t.namespace)
	}
	last := Verdict{Reason: "not read yet"}
	for {
		obj, err := res.Get(ctx, t.name, metav1.GetOptions{})
		if err != nil {
			return last, err
		}
		if last = JudgeActive(obj); last.Done || last.Failed {
			return last, nil
		}
		w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", t.name).String(),
			ResourceVersion: obj.GetResourceVersion()})
		if err != nil {
			return last, err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return Verdict{Failed: true, Reason: "it was deleted"}, nil
			}
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Error {
				break // re-read, watch again
			}
			if last = JudgeActive(o); last.Done || last.Failed {
				w.Stop()
				return last, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
	}
}
