package proxy

import (
	"crypto/tls"
	"fmt"

	"kubeos.dev/kube/internal/pki"
)

// KubeletClientUser is the identity the API server presents to node agents, as
// kube-apiserver's --kubelet-client-certificate (kubeadm names it
// kube-apiserver-kubelet-client and puts it in system:masters).
const KubeletClientUser = "kube-apiserver-kubelet-client"

// KubeletClientTLS mints the API server's client certificate toward node agents (CN
// KubeletClientUser, O system:masters, signed by the CA) and returns a TLS configuration
// presenting it and verifying an agent's serving certificate against the CA. Each call
// mints a new certificate; call it once at server start.
func KubeletClientTLS(p *pki.PKI) (*tls.Config, error) {
	certPEM, keyPEM, err := p.IssueClientCert(KubeletClientUser, []string{pki.AdminGroup}, 0)
	if err != nil {
		return nil, fmt.Errorf("proxy: kubelet client certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("proxy: kubelet client certificate: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      p.ClientCAPool(),
		MinVersion:   tls.VersionTLS12,
	}, nil
}
