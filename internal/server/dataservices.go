package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/nats"
	"kubeos.dev/kube/internal/dataservices/s3"
	"kubeos.dev/kube/internal/dataservices/servers"
)

// Server entries of the embedded data servers in kube-system.
const (
	EmbeddedNATSEntry = "nats-embedded"
	EmbeddedS3Entry   = "s3-embedded"
)

// DataServicesOptions configure the servers the data kinds (Database, Cache, Topic, Bucket,
// Backup, Alert) provision on: the embedded defaults `kube server` runs itself (NATS
// JetStream, an S3 store) and registers as server entries in kube-system, so that a single
// machine works with no setup. External servers are registered by a platform admin (see
// internal/dataservices/servers). The zero value runs neither; `kube server`'s flags default
// both on.
type DataServicesOptions struct {
	// EmbeddedNATS runs NATS JetStream in-process (internal/dataservices/nats), store in
	// DataDir/nats, registered as the server entry nats-embedded.
	EmbeddedNATS bool
	// EmbeddedNATSPort is its loopback client port; 0 picks a free one at every start.
	EmbeddedNATSPort int
	// EmbeddedS3 runs the versitygw S3 store (internal/dataservices/s3) as a child process of
	// this binary, data in DataDir/s3, registered as the server entry s3-embedded.
	EmbeddedS3 bool
	// EmbeddedS3Port is its loopback port; 0 picks a free one at every start.
	EmbeddedS3Port int
}

func (o *DataServicesOptions) validate() error {
	for flag, p := range map[string]int{"--embedded-nats-port": o.EmbeddedNATSPort, "--embedded-s3-port": o.EmbeddedS3Port} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("%s %d: not a port", flag, p)
		}
	}
	if o.EmbeddedNATSPort != 0 && o.EmbeddedNATSPort == o.EmbeddedS3Port {
		return errors.New("--embedded-nats-port and --embedded-s3-port are the same port")
	}
	return nil
}

// startDataServices starts the embedded data servers and registers them; they stop when ctx
// ends and wg tracks them. It runs on every server (each registers its own; with several
// servers on one etcd the last one started is the entry).
func (s *Server) startDataServices(ctx context.Context, wg *sync.WaitGroup) error {
	o := s.opts.DataServicesOptions
	if !o.EmbeddedNATS && !o.EmbeddedS3 {
		return nil
	}
	log := s.opts.Log.With("component", "dataservices")
	cfg, err := s.LoopbackConfig(ControllerUser("dataservices"), ControllersGroup)
	if err != nil {
		return fmt.Errorf("data services: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("data services: %w", err)
	}
	type embedded interface {
		Start(ctx context.Context) error
		Ready() <-chan struct{}
		Err() error
	}
	start := func(name string, e embedded) error {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Start(ctx); err != nil {
				log.Error("embedded server stopped", "server", name, "err", err)
			}
		}()
		select {
		case <-e.Ready():
			return e.Err()
		case <-time.After(60 * time.Second):
			return fmt.Errorf("embedded %s: not ready after 60s", name)
		}
	}
	if o.EmbeddedNATS {
		e, err := nats.NewEmbedded(nats.EmbeddedOptions{Dir: filepath.Join(s.opts.DataDir, "nats"),
			Port: o.EmbeddedNATSPort, Log: log.With("server", EmbeddedNATSEntry)})
		if err != nil {
			return err
		}
		if err := start(EmbeddedNATSEntry, e); err != nil {
			return err
		}
		if err := servers.Ensure(ctx, c, EmbeddedNATSEntry, servers.NATS,
			map[string][]byte{servers.KeyURL: []byte(e.URL())}, true); err != nil {
			return err
		}
	}
	if o.EmbeddedS3 {
		e, err := s3.NewEmbedded(s3.EmbeddedOptions{Dir: filepath.Join(s.opts.DataDir, "s3"),
			Port: o.EmbeddedS3Port, Log: log.With("server", EmbeddedS3Entry)})
		if err != nil {
			return err
		}
		if err := start(EmbeddedS3Entry, e); err != nil {
			return err
		}
		access, secret := e.RootKey()
		if err := servers.Ensure(ctx, c, EmbeddedS3Entry, servers.S3, map[string][]byte{
			servers.KeyURL: []byte(e.Endpoint()), servers.KeyAccessKeyID: []byte(access),
			servers.KeySecretAccessKey: []byte(secret), servers.KeyRegion: []byte(e.Region()),
		}, true); err != nil {
			return err
		}
	}
	return nil
}
