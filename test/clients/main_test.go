// Package clients tests Kube with unmodified client libraries: client-go informers with
// their default settings (streaming list included) and a controller-runtime manager with
// leader election, against one in-process server on embedded etcd.
package clients

import (
	"fmt"
	"os"
	"testing"

	"kubeos.dev/kube/internal/server/servertest"
)

var srv *servertest.Server

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}
