package servers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ensure registers (or updates) the entry name of kind with data, as `kube server` does for
// its embedded servers. It is the default of its kind when makeDefault is set and no other
// entry of the kind is the default.
func Ensure(ctx context.Context, c client.Client, name, kind string, data map[string][]byte, makeDefault bool) error {
	if makeDefault {
		entries, err := List(ctx, c, kind)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Default && e.Name != name {
				makeDefault = false
			}
		}
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: map[string]string{LabelKind: kind}},
		Type:       SecretType,
		Data:       data,
	}
	if makeDefault {
		want.Annotations = map[string]string{AnnotationDefault: "true"}
	}
	var cur corev1.Secret
	err := c.Get(ctx, client.ObjectKeyFromObject(want), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("register %s server %s: %w", kind, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("register %s server %s: %w", kind, name, err)
	}
	if cur.Type != SecretType {
		return fmt.Errorf("register %s server %s: secret %s/%s exists with type %q", kind, name, Namespace, name, cur.Type)
	}
	if maps.EqualFunc(cur.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) && cur.Labels[LabelKind] == kind &&
		(!makeDefault || cur.Annotations[AnnotationDefault] == "true") {
		return nil
	}
	cur.Data = data
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	cur.Labels[LabelKind] = kind
	if makeDefault {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[AnnotationDefault] = "true"
	}
	if err := c.Update(ctx, &cur); err != nil {
		return fmt.Errorf("register %s server %s: %w", kind, name, err)
	}
	return nil
}
