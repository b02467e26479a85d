// Package helm tests Helm 3.22 as a real client of Kube: install --wait, upgrade --wait,
// rollback and uninstall of the chart in chart/ (a Deployment, Service, ConfigMap,
// Secret, ServiceAccount and a post-install/post-upgrade Job hook), on simulated nodes
// with the server's scheduler and workload controllers. The helm binary is built from
// helm.sh/helm/v3@v3.22.0 (module proxy) into a directory under the system temp dir,
// reused by later runs; it is not a dependency of Kube's module.
package helm

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
)

var srv *servertest.Server

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var logOut io.Writer
	if os.Getenv("KUBE_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	srv, err = servertest.StartWith(dir, logOut, func(o *server.Options) {
		o.SimNodes = simnode.Options{Nodes: 2, JobRunTime: time.Second}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		return 1
	}
	defer srv.Stop()
	return m.Run()
}
