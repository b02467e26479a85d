// Command relro releases its start-up memory and then calls into the C library through the
// GOT. Built with external linking (as the kube binary is) it has a RELRO segment; it exits
// 0 when Release left that segment alone.
package main

import (
	"fmt"
	"os"
	"os/user"

	"kubeos.dev/kube/internal/agent/startupmem"
)

func main() {
	n, err := startupmem.Release()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	u, err := user.Current()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(n, u.Username)
}
