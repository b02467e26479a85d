package ctl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// Annotations a Release reads; its driver removes them once acted on.
const (
	promoteAnnotation = v1alpha1.PromoteAnnotation
	abortAnnotation   = v1alpha1.AbortAnnotation
)

// newPromoteCommand: `promote release/NAME [--full]` moves a Release past its current step
// (a pause until promoted, or any step), --full past all of them.
func newPromoteCommand(e *env) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "promote release/NAME [--full]",
		Short: "move a Release past its current step (--full: past all its steps)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			value := "true"
			if full {
				value = "full"
			}
			return e.annotateRelease(cmd.Context(), args, promoteAnnotation, value, "promoted")
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "skip the remaining steps: the revision becomes stable at once")
	return cmd
}

// newAbortCommand: `abort release/NAME` stops a Release's rollout and rolls it back.
func newAbortCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "abort release/NAME",
		Short: "stop a Release's rollout: the canary goes and the stable revision stays",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.annotateRelease(cmd.Context(), args, abortAnnotation, "true", "aborted")
		},
	}
}

// annotateRelease sets one annotation on a Release with the user's rights.
func (e *env) annotateRelease(ctx context.Context, args []string, key, value, done string) error {
	t, err := e.resolve(args)
	if err != nil {
		return err
	}
	if t.kind != "Release" {
		return fmt.Errorf("%s is a %s: promote and abort take a Release", t, t.kind)
	}
	cs, err := e.clientset()
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	if _, err := cs.KubeosV1alpha1().Releases(t.namespace).Patch(ctx, t.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(e.streams.Out, "%s %s\n", t, done)
	return nil
}
