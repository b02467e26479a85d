package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientOptions says how to reach an etcd cluster.
type ClientOptions struct {
	// Endpoints of the cluster's members, e.g. https://10.0.0.1:2379.
	Endpoints []string
	// CertFile and KeyFile are the client certificate for TLS client authentication.
	CertFile, KeyFile string
	// CAFile verifies the members' serving certificates.
	CAFile string
	// DialTimeout bounds the first connection. Default 5 s.
	DialTimeout time.Duration
}

// NewClient returns a client for the cluster. It does not wait for a member to answer.
func NewClient(o ClientOptions) (*clientv3.Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd client: no endpoints")
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	cfg := clientv3.Config{
		Endpoints:          o.Endpoints,
		DialTimeout:        o.DialTimeout,
		MaxCallSendMsgSize: 4 * 1024 * 1024,
		MaxCallRecvMsgSize: 1 << 30,
		Logger:             zap.NewNop(),
	}
	if o.CertFile != "" || o.KeyFile != "" || o.CAFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CertFile != "" || o.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("etcd client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("etcd CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("etcd CA %s: no certificates found", o.CAFile)
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}
