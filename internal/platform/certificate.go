package platform

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// AnnotationCertificate marks a Secret issued for a Certificate.
const AnnotationCertificate = "kubeos.dev/certificate"

type certificateDriver struct {
	c     client.Client
	ca    *x509.Certificate
	caKey crypto.Signer
	now   func() time.Time
}

func certSecret(c *v1alpha1.Certificate) string {
	if c.Spec.SecretName != "" {
		return c.Spec.SecretName
	}
	return c.Name
}

func certTimes(c *v1alpha1.Certificate) (dur, renew time.Duration) {
	dur = 2160 * time.Hour
	if c.Spec.Duration != nil && c.Spec.Duration.Duration > 0 {
		dur = c.Spec.Duration.Duration
	}
	renew = dur / 3
	if c.Spec.RenewBefore != nil && c.Spec.RenewBefore.Duration > 0 {
		renew = min(c.Spec.RenewBefore.Duration, dur)
	}
	return dur, renew
}

// issuer returns the CA to sign with: the Kube CA, or the issuer Certificate's key pair.
func (d *certificateDriver) issuer(ctx context.Context, c *v1alpha1.Certificate) (*x509.Certificate, crypto.Signer, error) {
	if c.Spec.Issuer == "" {
		if d.ca == nil {
			return nil, nil, fmt.Errorf("no Kube CA configured")
		}
		return d.ca, d.caKey, nil
	}
	var ic v1alpha1.Certificate
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Issuer}, &ic); err != nil {
		return nil, nil, err
	}
	if !ic.Spec.IsCA {
		return nil, nil, lifecycleTerminal{fmt.Errorf("issuer %s is not a CA certificate (isCA: false)", ic.Name)}
	}
	var s corev1.Secret
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: certSecret(&ic)}, &s); err != nil {
		return nil, nil, err
	}
	kp, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return cert, kp.PrivateKey.(crypto.Signer), nil
}

type lifecycleTerminal struct{ error }

func (d *certificateDriver) Observe(ctx context.Context, c *v1alpha1.Certificate) (lifecycle.Outcome, error) {
	var s corev1.Secret
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: certSecret(c)}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, nil
		}
		return lifecycle.Outcome{}, err
	}
	if s.Annotations[AnnotationCertificate] != c.Name {
		return lifecycle.Outcome{Terminal: fmt.Errorf("secret %s exists and is not managed by certificate %s", s.Name, c.Name), Reason: "SecretConflict"}, nil
	}
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil {
		return lifecycle.Outcome{Exists: true}, nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return lifecycle.Outcome{Exists: true}, nil
	}
	c.Status.NotBefore, c.Status.NotAfter = &metav1.Time{Time: cert.NotBefore}, &metav1.Time{Time: cert.NotAfter}
	c.Status.SerialNumber = cert.SerialNumber.Text(16)
	_, renew := certTimes(c)
	renewAt := cert.NotAfter.Add(-renew)
	if !slices.Equal(cert.DNSNames, c.Spec.DNSNames) || cert.IsCA != c.Spec.IsCA || !d.now().Before(renewAt) {
		return lifecycle.Outcome{Exists: true}, nil
	}
	return lifecycle.Outcome{Exists: true, UpToDate: true, RequeueAfter: renewAt.Sub(d.now())}, nil
}

func (d *certificateDriver) Provision(ctx context.Context, c *v1alpha1.Certificate) (lifecycle.Outcome, error) {
	return d.issue(ctx, c, false)
}

func (d *certificateDriver) Update(ctx context.Context, c *v1alpha1.Certificate) (lifecycle.Outcome, error) {
	return d.issue(ctx, c, true)
}

func (d *certificateDriver) issue(ctx context.Context, c *v1alpha1.Certificate, renew bool) (lifecycle.Outcome, error) {
	ca, caKey, err := d.issuer(ctx, c)
	if err != nil {
		if t, ok := err.(lifecycleTerminal); ok {
			return lifecycle.Outcome{Terminal: t.error, Reason: "BadIssuer"}, nil
		}
		return lifecycle.Outcome{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	dur, renewBefore := certTimes(c)
	now := d.now()
	cn := c.Spec.CommonName
	if cn == "" {
		cn = c.Name
		if len(c.Spec.DNSNames) > 0 {
			cn = c.Spec.DNSNames[0]
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: c.Spec.DNSNames,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(dur),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if c.Spec.IsCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
		tmpl.ExtKeyUsage = nil
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return lifecycle.Outcome{Terminal: err, Reason: "IssueFailed"}, nil
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	data := map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		"ca.crt":                pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
	}
	s := &corev1.Secret{}
	err = d.c.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: certSecret(c)}, s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: certSecret(c), OwnerReferences: ownerRef(c, "Certificate"),
			Annotations: map[string]string{AnnotationCertificate: c.Name}}, Type: corev1.SecretTypeTLS, Data: data}
		err = d.c.Create(ctx, s)
	case err == nil:
		s.Data = data
		err = d.c.Update(ctx, s)
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	c.Status.NotBefore, c.Status.NotAfter = &metav1.Time{Time: tmpl.NotBefore}, &metav1.Time{Time: tmpl.NotAfter}
	c.Status.SerialNumber = serial.Text(16)
	reason := "Issued"
	if renew {
		reason = "Renewed"
		c.Status.Renewals++
	}
	return lifecycle.Outcome{Reason: reason, Message: "valid until " + tmpl.NotAfter.UTC().Format(time.RFC3339),
		RequeueAfter: tmpl.NotAfter.Add(-renewBefore).Sub(now)}, nil
}

func (d *certificateDriver) Deprovision(ctx context.Context, c *v1alpha1.Certificate) (lifecycle.Outcome, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: certSecret(c)}}
	if err := d.c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Reason: "SecretDeleted"}, nil
}
