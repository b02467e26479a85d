// Command kube is Kube's single binary: `kube server`, `kube etcd`.
package main

import (
	"fmt"
	"os"

	"kubeos.dev/kube/internal/cli"
)

func main() {
	if err := cli.NewCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
