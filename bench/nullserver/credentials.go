package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// credentials are a CA made at start, the serving certificate and one client certificate it
// signs, all ECDSA P-256 as Kube's PKI makes them.
type credentials struct {
	caPool  *x509.CertPool
	caPEM   []byte
	serving tls.Certificate
	// clientCertPEM and clientKeyPEM go into the kubeconfig.
	clientCertPEM, clientKeyPEM []byte
}

func newCredentials() (*credentials, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nullserver-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, tmpl x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
	}
	c := &credentials{caPool: x509.NewCertPool(), caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	c.caPool.AddCert(ca)
	servingCert, servingKey, err := leaf(2, x509.Certificate{
		Subject:     pkix.Name{CommonName: "nullserver"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	if c.serving, err = tls.X509KeyPair(servingCert, servingKey); err != nil {
		return nil, err
	}
	c.clientCertPEM, c.clientKeyPEM, err = leaf(3, x509.Certificate{
		Subject:     pkix.Name{CommonName: "bench", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// writeKubeconfig writes a kubeconfig for server with the CA and the client certificate.
func (c *credentials) writeKubeconfig(path, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["null"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.caPEM}
	cfg.AuthInfos["null"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.clientCertPEM, ClientKeyData: c.clientKeyPEM}
	cfg.Contexts["null"] = &clientcmdapi.Context{Cluster: "null", AuthInfo: "null"}
	cfg.CurrentContext = "null"
	return clientcmd.WriteToFile(*cfg, path)
}
