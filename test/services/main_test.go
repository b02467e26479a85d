// Package services tests Service allocation end to end against real servers on embedded
// etcd: cluster IPs as IPAddress objects and node ports from the configured ranges,
// upstream's errors for addresses and ports in use or out of range, type changes, repair of
// leaked addresses, a server killed with SIGKILL in the middle of creates, and the
// default/kubernetes Service whose EndpointSlices list every live server.
package services

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

// The shared server's ranges: not the defaults, to show the flags are honoured.
const (
	clusterIPRange = "10.100.0.0/16"
	nodePortRange  = "31000-31099"
)

var (
	srv *servertest.Server
	cs  *kubernetes.Clientset
)

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.StartWith(dir, nil, func(o *server.Options) {
		o.ServiceClusterIPRange = clusterIPRange
		o.ServiceNodePortRange = nodePortRange
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	cfg, err := srv.Config()
	if err == nil {
		cs, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		srv.Stop()
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}
