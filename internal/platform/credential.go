package platform

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

type metav1OwnerReference = metav1.OwnerReference

// Annotations on generated Secrets.
const (
	AnnotationCredential = "kubeos.dev/credential"
	AnnotationRotatedAt  = "kubeos.dev/rotated-at"
	AnnotationType       = "kubeos.dev/credential-type"
)

// CredentialDriver generates a Credential's Secret and rotates it when its period is up. The
// Secret's kubeos.dev/rotated-at annotation is the truth status.lastRotated copies.
type CredentialDriver struct {
	Client client.Client
	Now    func() time.Time
}

var _ lifecycle.Driver[*v1alpha1.Credential] = (*CredentialDriver)(nil)

func secretName(cr *v1alpha1.Credential) string {
	if cr.Spec.SecretName != "" {
		return cr.Spec.SecretName
	}
	return cr.Name
}

// Observe finds the Secret and whether a rotation is due.
func (d *CredentialDriver) Observe(ctx context.Context, cr *v1alpha1.Credential) (lifecycle.Outcome, error) {
	cr.Status.SecretName = secretName(cr)
	var s corev1.Secret
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: cr.Namespace, Name: secretName(cr)}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, nil
		}
		return lifecycle.Outcome{}, err
	}
	if s.Annotations[AnnotationCredential] != cr.Name {
		return lifecycle.Outcome{Terminal: fmt.Errorf("secret %s exists and is not managed by credential %s", s.Name, cr.Name), Reason: "SecretConflict"}, nil
	}
	rotated, err := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationRotatedAt])
	if err != nil {
		return lifecycle.Outcome{Exists: true}, nil
	}
	cr.Status.LastRotated = &metav1.Time{Time: rotated}
	if s.Annotations[AnnotationType] != cr.Spec.Type {
		return lifecycle.Outcome{Exists: true}, nil
	}
	if p := cr.Spec.RotationPeriod; p != nil && p.Duration > 0 {
		due := rotated.Add(p.Duration)
		if now := d.Now(); now.Before(due) {
			return lifecycle.Outcome{Exists: true, UpToDate: true, RequeueAfter: due.Sub(now)}, nil
		}
		return lifecycle.Outcome{Exists: true}, nil
	}
	return lifecycle.Outcome{Exists: true, UpToDate: true}, nil
}

// Provision creates the Secret.
func (d *CredentialDriver) Provision(ctx context.Context, cr *v1alpha1.Credential) (lifecycle.Outcome, error) {
	s, err := d.secret(cr)
	if err != nil {
		return lifecycle.Outcome{Terminal: err}, nil
	}
	if err := d.Client.Create(ctx, s); err != nil {
		return lifecycle.Outcome{}, err
	}
	return d.done(cr, "Generated"), nil
}

// Update rotates: new data in the same Secret.
func (d *CredentialDriver) Update(ctx context.Context, cr *v1alpha1.Credential) (lifecycle.Outcome, error) {
	var cur corev1.Secret
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: cr.Namespace, Name: secretName(cr)}, &cur); err != nil {
		return lifecycle.Outcome{}, err
	}
	s, err := d.secret(cr)
	if err != nil {
		return lifecycle.Outcome{Terminal: err}, nil
	}
	cur.Data, cur.Annotations = s.Data, s.Annotations
	if err := d.Client.Update(ctx, &cur); err != nil {
		return lifecycle.Outcome{}, err
	}
	cr.Status.Rotations++
	return d.done(cr, "Rotated"), nil
}

func (d *CredentialDriver) done(cr *v1alpha1.Credential, reason string) lifecycle.Outcome {
	now := d.Now()
	cr.Status.LastRotated = &metav1.Time{Time: now}
	out := lifecycle.Outcome{Reason: reason, Message: "secret " + secretName(cr)}
	if p := cr.Spec.RotationPeriod; p != nil && p.Duration > 0 {
		out.RequeueAfter = p.Duration
	}
	return out
}

// Deprovision deletes the Secret.
func (d *CredentialDriver) Deprovision(ctx context.Context, cr *v1alpha1.Credential) (lifecycle.Outcome, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cr.Namespace, Name: secretName(cr)}}
	if err := d.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Reason: "SecretDeleted"}, nil
}

func (d *CredentialDriver) secret(cr *v1alpha1.Credential) (*corev1.Secret, error) {
	n := cr.Spec.Length
	if n == 0 {
		n = 32
	}
	data := map[string][]byte{}
	switch cr.Spec.Type {
	case v1alpha1.CredentialPassword:
		data["password"] = []byte(randomString(n))
	case v1alpha1.CredentialToken:
		b := make([]byte, n)
		_, _ = rand.Read(b)
		data["token"] = []byte(base64.RawURLEncoding.EncodeToString(b))
	case v1alpha1.CredentialKeyPair:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		pk, _ := x509.MarshalPKCS8PrivateKey(priv)
		pb, _ := x509.MarshalPKIXPublicKey(pub)
		data["private.pem"] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
		data["public.pem"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pb})
	default:
		return nil, fmt.Errorf("unknown credential type %q", cr.Spec.Type)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cr.Namespace, Name: secretName(cr), OwnerReferences: ownerRef(cr, "Credential"),
			Annotations: map[string]string{AnnotationCredential: cr.Name, AnnotationRotatedAt: d.Now().UTC().Format(time.RFC3339Nano),
				AnnotationType: cr.Spec.Type}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}, nil
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomString(n int) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		v, _ := rand.Int(rand.Reader, max)
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}
