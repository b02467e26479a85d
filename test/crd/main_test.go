// Package crd tests CustomResourceDefinitions end to end against one in-process Kube
// server: kubectl 1.27 and 1.33 on the Database example of the design (schema validation,
// defaults, printer columns, explain, scale, status), client-go on invalid CRDs, name
// conflicts, deletion, webhook conversion with storage-version migration, and a dynamic
// informer on a custom resource.
//
//	go test ./test/crd/
package crd

import (
	"fmt"
	"os"
	"testing"

	"kubeos.dev/kube/internal/server/servertest"
)

var (
	srv       *servertest.Server
	serverLog syncBuffer
)

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, &serverLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	if err := createUnservedMigration(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

type syncBuffer = servertest.Buffer
