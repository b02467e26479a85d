package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ClientCAPool returns a new pool holding the CA, for verifying client certificates.
func (p *PKI) ClientCAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	return pool
}

// ServingTLSConfig returns the API server's TLS configuration: the serving certificate read
// from ServingCertFile and ServingKeyFile, client certificates verified against the CA when a
// client offers one (requests without one go on to other authenticators), TLS 1.2 or later, and
// ALPN h2 then http/1.1.
func (p *PKI) ServingTLSConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(p.ServingCertFile, p.ServingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: loading serving certificate %s: %w", p.ServingCertFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.ClientCAPool(),
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// IssueClientCert issues a client certificate signed by the CA for user (the subject CN, the
// Kubernetes user name) in groups (the subject O values, the Kubernetes groups), with a fresh
// ECDSA P-256 key. Validity 0 means LeafValidity; the certificate never outlives the CA.
func (p *PKI) IssueClientCert(user string, groups []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	switch {
	case p == nil || p.CA == nil || p.CAKey == nil:
		return nil, nil, errors.New("pki: IssueClientCert: CA not loaded")
	case user == "":
		return nil, nil, errors.New("pki: IssueClientCert: empty user name")
	case validity < 0:
		return nil, nil, fmt.Errorf("pki: IssueClientCert: negative validity %s", validity)
	case slices.Contains(groups, ""):
		return nil, nil, errors.New("pki: IssueClientCert: empty group name")
	}
	if validity == 0 {
		validity = LeafValidity
	}
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: slices.Clone(groups)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPEM, err = p.sign(tmpl, key.Public(), validity)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	return certPEM, keyPEM, nil
}
