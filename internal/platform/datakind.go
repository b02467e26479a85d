package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// Shared parts of the data kinds' drivers: the tenant, the server entry, the password and
// the connection Secret.

// DataPeriod is how often an Active data object is observed for drift (tunable per kind).
const DataPeriod = time.Minute

// tenantOf reads the tenant of a namespace (its kubeos.dev/tenant label; "" when none).
func tenantOf(ctx context.Context, c client.Reader, namespace string) (string, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return "", fmt.Errorf("namespace %s: %w", namespace, err)
	}
	return ns.Labels[v1alpha1.LabelTenant], nil
}

// resolveServer finds the entry an object uses: the one recorded in its status once
// provisioned (so that a new default does not move it), else spec.server or the default.
// A missing entry is a wait (Reconciling), a forbidden one terminal; out is non-nil then.
func resolveServer(ctx context.Context, o Options, kind, namespace, specServer, statusServer string) (servers.Entry, *lifecycle.Outcome, error) {
	tenant, err := tenantOf(ctx, o.Client, namespace)
	if err != nil {
		return servers.Entry{}, nil, err
	}
	name := specServer
	if name == "" {
		name = statusServer
	}
	e, err := o.Servers.Resolve(ctx, kind, name, tenant)
	switch {
	case servers.IsNotAllowed(err):
		return e, &lifecycle.Outcome{Terminal: err, Reason: "ServerNotAllowed"}, nil
	case servers.IsNotFound(err):
		return e, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "ServerNotFound", Message: err.Error(),
			RequeueAfter: 15 * time.Second}, nil
	case err != nil:
		return e, nil, err
	}
	return e, nil, nil
}

// passwordFromCredential reads the password of a Credential of type password, and when it
// rotates next (0: never).
func passwordFromCredential(ctx context.Context, o Options, namespace, name string) (pw string, next time.Duration, out *lifecycle.Outcome, err error) {
	var cr v1alpha1.Credential
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cr); err != nil {
		if apierrors.IsNotFound(err) {
			return "", 0, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "CredentialNotFound",
				Message: "waiting for Credential " + name, RequeueAfter: 10 * time.Second}, nil
		}
		return "", 0, nil, err
	}
	if cr.Spec.Type != v1alpha1.CredentialPassword {
		return "", 0, &lifecycle.Outcome{Terminal: fmt.Errorf("passwordFrom: Credential %s is of type %s, want password", name, cr.Spec.Type),
			Reason: "CredentialType"}, nil
	}
	var s corev1.Secret
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName(&cr)}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", 0, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "CredentialNotReady",
				Message: "waiting for the Secret of Credential " + name, RequeueAfter: 5 * time.Second}, nil
		}
		return "", 0, nil, err
	}
	pw = string(s.Data["password"])
	if pw == "" {
		return "", 0, &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "CredentialNotReady",
			Message: "the Secret of Credential " + name + " has no password", RequeueAfter: 5 * time.Second}, nil
	}
	if p := cr.Spec.RotationPeriod; p != nil && p.Duration > 0 {
		if at, err := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationRotatedAt]); err == nil {
			next = max(time.Until(at.Add(p.Duration))+time.Second, time.Second)
		}
	}
	return pw, next, nil, nil
}

// connectionSecret reads an object's connection Secret: nil when absent; a terminal outcome
// when the name is taken by a Secret the object does not control.
func connectionSecret(ctx context.Context, c client.Reader, obj client.Object, name string) (*corev1.Secret, *lifecycle.Outcome, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != obj.GetUID() {
		return nil, &lifecycle.Outcome{Terminal: fmt.Errorf("secret %s exists and is not controlled by this object", name), Reason: "SecretConflict"}, nil
	}
	return &s, nil, nil
}

// desiredPassword is the password an object's role/user gets: the Credential's
// (passwordFrom), else the one in its connection Secret, else a new one.
func desiredPassword(ctx context.Context, o Options, obj client.Object, from *v1alpha1.PasswordFrom, cur *corev1.Secret) (string, time.Duration, *lifecycle.Outcome, error) {
	if from != nil {
		return passwordFromCredential(ctx, o, obj.GetNamespace(), from.Credential)
	}
	if cur != nil && len(cur.Data["password"]) > 0 {
		return string(cur.Data["password"]), 0, nil, nil
	}
	return randomString(32), 0, nil, nil
}

// secretUpToDate compares a connection Secret's data with want.
func secretUpToDate(cur *corev1.Secret, want map[string][]byte) bool {
	return cur != nil && maps.EqualFunc(cur.Data, want, func(a, b []byte) bool { return string(a) == string(b) })
}

// writeConnectionSecret creates or updates the connection Secret, controlled by obj.
func writeConnectionSecret(ctx context.Context, c client.Client, obj client.Object, kind, name string, data map[string][]byte) error {
	var cur corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: name, OwnerReferences: ownerRef(obj, kind),
				Labels: map[string]string{"kubeos.dev/" + strings.ToLower(kind): obj.GetName()}},
			Type: v1alpha1.SecretTypeConnection,
			Data: data,
		}
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("create connection secret %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read connection secret %s: %w", name, err)
	}
	if ref := metav1.GetControllerOf(&cur); ref == nil || ref.UID != obj.GetUID() {
		return fmt.Errorf("secret %s exists and is not controlled by this object", name)
	}
	if secretUpToDate(&cur, data) {
		return nil
	}
	cur.Data = data
	if err := c.Update(ctx, &cur); err != nil {
		return fmt.Errorf("update connection secret %s: %w", name, err)
	}
	return nil
}

// shortName fits name into max characters, replacing the tail with a hash when it is
// longer (so distinct long names stay distinct).
func shortName(name string, max int) string {
	if len(name) <= max {
		return name
	}
	h := sha256.Sum256([]byte(name))
	return name[:max-9] + "_" + hex.EncodeToString(h[:4])
}

// deletionPolicy is the effective policy (Retain by default).
func deletionPolicy(p string) string {
	if p == "" {
		return v1alpha1.DeletionRetain
	}
	return p
}
