// Command kube is Kube's single binary: `kube server`, `kube etcd`, `kube ctl`; installed
// (or linked) as kubectl-kube on PATH it is the kubectl plugin `kubectl kube`.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kubeos.dev/kube/internal/cli"
	"kubeos.dev/kube/internal/ctl"
)

func main() {
	var cmd *cobra.Command
	if filepath.Base(os.Args[0]) == "kubectl-kube" {
		cmd = cli.NewKubectlPlugin(os.Stdout, os.Stderr)
	} else {
		cmd = cli.NewCommand(os.Stdout, os.Stderr)
	}
	if err := cmd.Execute(); err != nil {
		var ee *ctl.ExitError
		if isCtl(cmd) || errors.As(err, &ee) {
			ee = ctl.Exit(err)
			if ee.Msg != "" {
				fmt.Fprintln(os.Stderr, ee.Msg)
			}
			os.Exit(ee.Code)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// isCtl reports whether the command that ran is kube ctl's (its errors read like kubectl's).
func isCtl(root *cobra.Command) bool {
	c, _, err := root.Find(os.Args[1:])
	if err != nil {
		return false
	}
	for ; c != nil; c = c.Parent() {
		if c.Name() == "ctl" || c.Use == "kubectl kube" {
			return true
		}
	}
	return false
}
