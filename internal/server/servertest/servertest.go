// Package servertest runs a real `kube server` in-process for tests: embedded etcd in a
// temporary directory, a free port, the admin kubeconfig — through exactly the path
// `kube server` takes (Options → Complete → Validate → New → Run). Share one per test
// package (start it in TestMain) so the suite does not start dozens of etcds.
//
// Tests that only run kube or kubectl as processes import servertest/kubeproc instead, whose
// helpers this package re-exports (process.go): it does not link the server.
package servertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

// Server is a running in-process Kube server.
type Server struct {
	// DataDir holds etcd, the PKI and the kubeconfig; it survives Restart.
	DataDir string
	// Port is the HTTPS port; it stays the same across Restart.
	Port int
	// Kubeconfig is the admin kubeconfig path.
	Kubeconfig string
	// URL is the server's address.
	URL string

	s      *server.Server
	cancel context.CancelFunc
	done   chan error
	log    io.Writer
	mutate func(*server.Options)
}

// Start runs a server in dataDir on a free loopback port and waits until it is ready.
// Logs go to logOut (nil discards them).
func Start(dataDir string, logOut io.Writer) (*Server, error) {
	return StartWith(dataDir, logOut, nil)
}

// StartWith is Start with options changed by mutate (flags such as --audit-policy-file)
// before they are completed and validated; Restart applies mutate again.
func StartWith(dataDir string, logOut io.Writer, mutate func(*server.Options)) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ts := &Server{DataDir: dataDir, Port: port, log: logOut, mutate: mutate}
	return ts, ts.start()
}

func (ts *Server) start() error {
	out := ts.log
	if out == nil {
		out = io.Discard
	}
	o := server.Options{
		DataDir:     ts.DataDir,
		BindAddress: "127.0.0.1",
		SecurePort:  ts.Port,
		Out:         out,
		Log:         slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// fsync guards against losing the machine, not the process: a kill -9 keeps what
		// etcd wrote in the page cache. Without it, the suite's many embedded members do not
		// queue behind each other's WAL syncs on a loaded disk, where a proposal waiting more
		// than etcd's 7 s failed a test with "etcdserver: request timed out" (CI, 12-06).
		EtcdUnsafeNoFsync: true,
	}
	if ts.mutate != nil {
		ts.mutate(&o)
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	startCtx, startCancel := context.WithTimeout(ctx, 60*time.Second)
	defer startCancel()
	s, err := server.New(startCtx, o)
	if err != nil {
		cancel()
		return err
	}
	ts.s, ts.cancel, ts.done = s, cancel, make(chan error, 1)
	ts.Kubeconfig, ts.URL = s.KubeconfigPath, s.URL
	go func() { ts.done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
		return nil
	case err := <-ts.done:
		cancel()
		return fmt.Errorf("server stopped before it was ready: %v", err)
	case <-startCtx.Done():
		ts.Stop()
		return fmt.Errorf("server not ready within 60 s")
	}
}

// Stop shuts the server down as SIGTERM would and waits until etcd has stopped.
func (ts *Server) Stop() error {
	if ts.cancel == nil {
		return nil
	}
	ts.cancel()
	ts.cancel = nil
	return <-ts.done
}

// Restart stops the server and starts it again on the same data directory and port.
func (ts *Server) Restart() error {
	if err := ts.Stop(); err != nil {
		return err
	}
	return ts.start()
}

// Config is an admin client configuration (no client-side rate limit).
func (ts *Server) Config() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", ts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	return cfg, nil
}

// Inner is the server itself, for tests that need its registry or store.
func (ts *Server) Inner() *server.Server { return ts.s }

// freePort is a port of the process's test slot (slot.FreePort): a port of the ephemeral
// range, picked by listening on :0, may be taken by another connection before the server
// binds it, and Restart binds it again later.
func freePort() (int, error) { return slot.FreePort() }
