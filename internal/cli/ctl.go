package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// newCtlCommand is `kube ctl` (also the binary's behaviour when invoked as kubectl-kube):
// operator tooling over the API — health, tree, why, why-stuck, audit, wait.
func newCtlCommand(out, errOut io.Writer) *cobra.Command {
	return &cobra.Command{Use: "ctl", Short: "operator tooling: health, tree, why, why-stuck, audit, wait (also `kubectl kube`)"}
}
