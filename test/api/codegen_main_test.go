package api

// The codegen suite tests the generated typed clients of kubeos.dev/v1alpha1 (pkg/client):
// that they are up to date with pkg/apis (hack/update-codegen.sh --output-dir, compared with
// pkg/client, so `go test` in CI fails on stale generated code), and that the clientset, the
// apply configurations, the informers and the listers work against its own in-process kube
// server whose lifecycle engine drives the objects.

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/client/clientset/versioned"
)

var codegenSrv *servertest.Server

var codegenSuite = servertest.NewFixture("codegen", func(fx *servertest.Fixture) error {
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	fx.Cleanup(func() { os.RemoveAll(dir) })
	codegenSrv, err = servertest.Start(dir, nil)
	if err != nil {
		return fmt.Errorf("start kube server: %w", err)
	}
	fx.Cleanup(func() { codegenSrv.Stop() })
	return nil
})

// codegenClients are the generated kubeos.dev clientset and client-go's, both as the admin.
func codegenClients(t *testing.T) (*versioned.Clientset, *kubernetes.Clientset) {
	t.Helper()
	cfg, err := codegenSrv.Config()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc, core
}
