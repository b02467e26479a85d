package pki

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names inside Options.Dir.
const (
	CACertName            = "ca.crt"
	CAKeyName             = "ca.key"
	ServingCertName       = "serving.crt"
	ServingKeyName        = "serving.key"
	AdminCertName         = "admin.crt"
	AdminKeyName          = "admin.key"
	ServiceAccountKeyName = "sa.key"
	ServiceAccountPubName = "sa.pub"
	// The front-proxy CA signs only the client certificate the server presents to the
	// extension API servers it proxies to (kube-aggregator's requestheader CA).
	FrontProxyCACertName = "front-proxy-ca.crt"
	FrontProxyCAKeyName  = "front-proxy-ca.key"
)

// Identities and lifetimes of what Ensure creates.
const (
	CACommonName = "kube-ca"
	// FrontProxyCACommonName and FrontProxyClientName are the front-proxy CA's subject and
	// the proxy client certificate's CN (the requestheader allowed name).
	FrontProxyCACommonName = "kube-front-proxy-ca"
	FrontProxyClientName   = "front-proxy-client"
	ServingCommonName      = "kube-apiserver"
	AdminUser              = "kube-admin"
	AdminGroup             = "system:masters"

	CAValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is the lifetime of the serving and admin certificates, and of client
	// certificates issued with validity 0.
	LeafValidity = 365 * 24 * time.Hour
	// RenewBefore is how long before expiry Ensure reissues the serving and admin certificates.
	RenewBefore = 30 * 24 * time.Hour

	// backdate absorbs clock skew between the server and its clients.
	backdate = time.Hour
)

// ErrCorrupt is wrapped by errors for a file in the PKI directory that exists but cannot be
// used (unparseable PEM, certificate or key); the message names the file.
var ErrCorrupt = errors.New("corrupt PKI file")

// Options configures Ensure.
type Options struct {
	// Dir is the PKI directory, normally <data-dir>/pki. Required; created 0700 if absent.
	Dir string
	// Hosts are extra subject alternative names for the serving certificate: the advertise
	// address, external host names. Each is an IP address (IPv6 with or without brackets) or a
	// DNS name (wildcards allowed); a host:port or other malformed entry is an error. Ensure
	// always adds localhost, 127.0.0.1, ::1, os.Hostname() and the in-cluster names.
	Hosts []string
	// Now is the clock; nil means time.Now. Tests set it to exercise expiry.
	Now func() time.Time
}

// PKI is the loaded PKI. Paths are absolute when Options.Dir is.
type PKI struct {
	CA    *x509.Certificate
	CAKey crypto.Signer
	CAPEM []byte

	CAFile, CAKeyFile string

	ServingCertFile, ServingKeyFile string

	AdminCertFile, AdminKeyFile string
	// AdminCertPEM and AdminKeyPEM hold the admin credentials, ready for WriteKubeconfig.
	AdminCertPEM, AdminKeyPEM []byte

	// ServiceAccountKey signs service-account JWTs (ES256 for the default ECDSA P-256 key).
	ServiceAccountKey                            crypto.Signer
	ServiceAccountKeyFile, ServiceAccountPubFile string

	// FrontProxy is the front-proxy CA (FrontProxy.CAPEM is the requestheader client CA
	// the extension API servers trust); FrontProxyClient issues the proxy's certificate.
	FrontProxy *PKI

	caCommonName string
	now          func() time.Time
}

// FrontProxyClient issues a fresh front-proxy client certificate (CN front-proxy-client)
// from the front-proxy CA.
func (p *PKI) FrontProxyClient() (certPEM, keyPEM []byte, err error) {
	if p.FrontProxy == nil {
		return nil, nil, errors.New("pki: no front-proxy CA")
	}
	return p.FrontProxy.IssueClientCert(FrontProxyClientName, nil, 0)
}

// Ensure creates the PKI in o.Dir on the first start and loads it on later starts, renewing
// the serving and admin certificates when needed. See the package documentation for the
// contract. Errors about a damaged file wrap ErrCorrupt.
func Ensure(o Options) (*PKI, error) {
	if o.Dir == "" {
		return nil, errors.New("pki: Options.Dir is empty")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	host, _ := os.Hostname()
	want, err := servingSANs(o.Hosts, host)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if err := prepareDir(o.Dir); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}

	p := &PKI{
		CAFile:                filepath.Join(o.Dir, CACertName),
		CAKeyFile:             filepath.Join(o.Dir, CAKeyName),
		ServingCertFile:       filepath.Join(o.Dir, ServingCertName),
		ServingKeyFile:        filepath.Join(o.Dir, ServingKeyName),
		AdminCertFile:         filepath.Join(o.Dir, AdminCertName),
		AdminKeyFile:          filepath.Join(o.Dir, AdminKeyName),
		ServiceAccountKeyFile: filepath.Join(o.Dir, ServiceAccountKeyName),
		ServiceAccountPubFile: filepath.Join(o.Dir, ServiceAccountPubName),
		now:                   o.Now,
	}
	if err := p.ensureCA(); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p.FrontProxy = &PKI{CAFile: filepath.Join(o.Dir, FrontProxyCACertName), CAKeyFile: filepath.Join(o.Dir, FrontProxyCAKeyName),
		caCommonName: FrontProxyCACommonName, now: o.Now}
	if err := p.FrontProxy.ensureCA(); err != nil {
		return nil, fmt.Errorf("pki: front-proxy CA: %w", err)
	}
	serving := leaf{
		certFile: p.ServingCertFile,
		keyFile:  p.ServingKeyFile,
		usage:    x509.ExtKeyUsageServerAuth,
		template: x509.Certificate{
			Subject:     pkix.Name{CommonName: ServingCommonName},
			DNSNames:    want.dns,
			IPAddresses: want.ips,
		},
		fits: func(c *x509.Certificate) bool { return sanSetOf(c).equal(want) },
	}
	if _, _, err := p.ensureLeaf(serving); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	admin := leaf{
		certFile: p.AdminCertFile,
		keyFile:  p.AdminKeyFile,
		usage:    x509.ExtKeyUsageClientAuth,
		template: x509.Certificate{
			Subject: pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		},
		fits: func(c *x509.Certificate) bool {
			return c.Subject.CommonName == AdminUser && len(c.Subject.Organization) == 1 &&
				c.Subject.Organization[0] == AdminGroup
		},
	}
	if p.AdminCertPEM, p.AdminKeyPEM, err = p.ensureLeaf(admin); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return p, nil
}

// prepareDir creates dir 0700 (tightening a looser mode) and removes temporary files a crash
// left behind.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"+tmpInfix+"*"))
	for _, f := range leftovers {
		_ = os.Remove(f)
	}
	return nil
}

// ensureCA loads the CA or, when ca.crt is absent, creates one.
func (p *PKI) ensureCA() error {
	keyFile := p.CAKeyFile
	now := p.clock()
	cert, certPEM, err := readCert(p.CAFile)
	if errors.Is(err, fs.ErrNotExist) {
		return p.createCA(keyFile, now)
	}
	if err != nil {
		return err
	}
	key, _, err := readKey(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s exists but its key %s is missing; restore the key, or delete both to create a new CA", p.CAFile, keyFile)
	}
	if err != nil {
		return err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fmt.Errorf("%w: %s: not a CA certificate", ErrCorrupt, p.CAFile)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return fmt.Errorf("%w: %s does not match %s", ErrCorrupt, keyFile, p.CAFile)
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("CA %s expired at %s; delete %s and %s to create a new CA",
			p.CAFile, cert.NotAfter.Format(time.RFC3339), p.CAFile, keyFile)
	}
	p.CA, p.CAKey, p.CAPEM = cert, key, certPEM
	return nil
}

func (p *PKI) createCA(keyFile string, now time.Time) error {
	key, keyPEM, err := newKey()
	if err != nil {
		return err
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cmp.Or(p.caCommonName, CACommonName)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("creating CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(p.CAFile, certPEM, 0o644); err != nil {
		return err
	}
	p.CA, p.CAKey, p.CAPEM = cert, key, certPEM
	return nil
}

// ensureServiceAccountKey loads or creates sa.key and keeps sa.pub in step with it.
func (p *PKI) ensureServiceAccountKey() error {
	key, _, err := readKey(p.ServiceAccountKeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var keyPEM []byte
		if key, keyPEM, err = newKey(); err != nil {
			return err
		}
		if err := writeFileAtomic(p.ServiceAccountKeyFile, keyPEM, 0o600); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	p.ServiceAccountKey = key

	pub, err := readPublicKey(p.ServiceAccountPubFile)
	if err == nil && publicKeysEqual(pub, key.Public()) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	return writeFileAtomic(p.ServiceAccountPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// leaf describes a CA-signed certificate that Ensure keeps on disk.
type leaf struct {
	certFile, keyFile string
	usage             x509.ExtKeyUsage
	template          x509.Certificate // Subject and SANs
	fits              func(*x509.Certificate) bool
}

// ensureLeaf loads l's certificate and key, reissuing both when renewalReason says so. It
// returns the PEM of the certificate and key in use.
func (p *PKI) ensureLeaf(l leaf) (certPEM, keyPEM []byte, err error) {
	cert, certPEM, certErr := readCert(l.certFile)
	key, keyPEM, keyErr := readKey(l.keyFile)
	for _, err := range []error{certErr, keyErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	if certErr == nil && keyErr == nil && renewalReason(cert, key, p.CA, l.usage, p.clock(), l.fits) == "" {
		return certPEM, keyPEM, nil
	}
	key, keyPEM, err = newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := l.template
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{l.usage}
	certPEM, err = p.sign(&tmpl, key.Public(), LeafValidity)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(l.keyFile, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(l.certFile, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// renewalReason says why a leaf certificate must be reissued, or "" if it can stay.
func renewalReason(cert *x509.Certificate, key crypto.Signer, ca *x509.Certificate, usage x509.ExtKeyUsage, now time.Time, fits func(*x509.Certificate) bool) string {
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return "key does not match certificate"
	}
	if now.Add(RenewBefore).After(cert.NotAfter) {
		return "expires within the renewal window"
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "does not verify against the CA: " + err.Error()
	}
	if fits != nil && !fits(cert) {
		return "subject or names changed"
	}
	return ""
}

// sign issues tmpl (Subject, SANs, ExtKeyUsage set by the caller) for pub, valid from now for
// validity but never beyond the CA, and returns the certificate PEM.
func (p *PKI) sign(tmpl *x509.Certificate, pub crypto.PublicKey, validity time.Duration) ([]byte, error) {
	now := p.clock()
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(p.CA.NotAfter) {
		tmpl.NotAfter = p.CA.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, pub, p.CAKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// newKey generates an ECDSA P-256 key and its PKCS#8 PEM.
func newKey() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// clock is Options.Now, or time.Now for a PKI not made by Ensure.
func (p *PKI) clock() time.Time {
	if p.now == nil {
		return time.Now()
	}
	return p.now()
}
