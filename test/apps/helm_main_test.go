package apps

// The helm suite tests Helm 3.22 as a real client of Kube: install --wait, upgrade --wait,
// rollback and uninstall of the chart in helm-chart/ (a Deployment, Service, ConfigMap,
// Secret, ServiceAccount and a post-install/post-upgrade Job hook), on simulated nodes
// with the server's scheduler and workload controllers. The helm binary is built from
// helm.sh/helm/v3@v3.22.0 (module proxy) into a directory under the system temp dir,
// reused by later runs; it is not a dependency of Kube's module.

import (
	"fmt"
	"io"
	"os"
	"time"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
)

var helmSrv *servertest.Server

var helmSuite = servertest.NewFixture("helm", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	var logOut io.Writer
	if os.Getenv("KUBE_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	helmSrv, err = servertest.StartWith(dir, logOut, func(o *server.Options) {
		o.SimNodes = simnode.Options{Nodes: 2, JobRunTime: time.Second}
	})
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { helmSrv.Stop() })
	return nil
})
