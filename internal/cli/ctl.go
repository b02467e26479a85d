package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"kubeos.dev/kube/internal/ctl"
)

// newCtlCommand is `kube ctl` (also the binary's behaviour when invoked as kubectl-kube):
// operator tooling over the API — health, tree, why, why-stuck, audit, wait.
func newCtlCommand(out, errOut io.Writer) *cobra.Command {
	return ctl.NewCommand("ctl", genericiooptions.IOStreams{In: os.Stdin, Out: out, ErrOut: errOut})
}

// NewKubectlPlugin is the command tree of the kubectl plugin `kubectl kube` (the binary
// named kubectl-kube on PATH).
func NewKubectlPlugin(out, errOut io.Writer) *cobra.Command {
	return ctl.NewCommand("kubectl kube", genericiooptions.IOStreams{In: os.Stdin, Out: out, ErrOut: errOut})
}
