package api

// The crd suite tests CustomResourceDefinitions end to end against its own in-process Kube
// server: kubectl 1.27 and 1.33 on the Database example of the design (schema validation,
// defaults, printer columns, explain, scale, status), client-go on invalid CRDs, name
// conflicts, deletion, webhook conversion with storage-version migration, and a dynamic
// informer on a custom resource.

import (
	"fmt"
	"os"

	"kubeos.dev/kube/internal/server/servertest"
)

var (
	crdSrv    *servertest.Server
	serverLog syncBuffer
)

var crdSuite = servertest.NewFixture("crd", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	crdSrv, err = servertest.Start(dir, &serverLog)
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { crdSrv.Stop() })
	return createUnservedMigration()
})

type syncBuffer = servertest.Buffer
