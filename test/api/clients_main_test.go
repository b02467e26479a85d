package api

// The clients suite tests Kube with unmodified client libraries: client-go informers with
// their default settings (streaming list included) and a controller-runtime manager with
// leader election, against its own in-process server on embedded etcd.

import (
	"fmt"
	"os"

	"kubeos.dev/kube/internal/server/servertest"
)

var clientsSrv *servertest.Server

var clientsSuite = servertest.NewFixture("clients", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	clientsSrv, err = servertest.Start(dir, nil)
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { clientsSrv.Stop() })
	return nil
})
