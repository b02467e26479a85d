package server

import (
	"fmt"

	"kubeos.dev/kube/internal/apiserver/aggregator"
)

// AggregatorUser is the identity of the aggregator's own loopback client (it reads
// APIServices, Services and EndpointSlices and writes APIService status).
const AggregatorUser = "system:kube-aggregator"

// newAggregator builds the API aggregation layer (internal/apiserver/aggregator) with a
// front-proxy client certificate freshly issued by the front-proxy CA.
func (s *Server) newAggregator() (*aggregator.Aggregator, error) {
	certPEM, keyPEM, err := s.pki.FrontProxyClient()
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	cfg, err := s.LoopbackConfig(AggregatorUser, "system:masters")
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	return aggregator.New(aggregator.Options{Config: cfg, ProxyCertPEM: certPEM, ProxyKeyPEM: keyPEM, Log: s.opts.Log.With("component", "aggregator")})
}
