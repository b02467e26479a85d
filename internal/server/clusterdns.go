package server

import "context"

// ClusterDNSOptions configure the cluster DNS Service, kube-system/kube-dns, whose
// ClusterIP the node agents answer on (internal/agent/dns).
type ClusterDNSOptions struct{}

func (o *ClusterDNSOptions) validate() error { return nil }

// ensureClusterDNS creates the kube-dns Service when it is missing (stub until the
// cluster DNS lands).
func (s *Server) ensureClusterDNS(ctx context.Context) error { return nil }
