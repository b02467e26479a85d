package greeting

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "kubeos.dev/kube/examples/operator/api/v1alpha1"
	kubeosv1alpha1 "kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	kubeoslisters "kubeos.dev/kube/pkg/client/listers/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// AnnotationGreeting on a ConfigMap names the Greeting that owns it.
const AnnotationGreeting = "example.kubeos.dev/greeting"

// Keys of the rendered ConfigMap.
const (
	KeyGreeting         = "greeting"
	KeyCredentialSecret = "credentialSecret"
)

// Driver renders Greetings into ConfigMaps.
type Driver struct {
	// Client reads and writes ConfigMaps.
	Client client.Client
	// Credentials is the generated lister over a Credential informer.
	Credentials kubeoslisters.CredentialLister
	// Poll is how soon a Greeting waiting for its Credential looks again.
	Poll time.Duration
}

var _ lifecycle.Driver[*examplev1alpha1.Greeting] = (*Driver)(nil)

// ConfigMapName is the ConfigMap a Greeting renders into.
func ConfigMapName(g *examplev1alpha1.Greeting) string { return g.Name + "-greeting" }

// Render is the greeting text.
func Render(s examplev1alpha1.GreetingSpec) string { return s.Message + ", " + s.To + "!" }

// Data is the ConfigMap's data for a greeting text and a Credential's Secret ("" if none).
func Data(text, secret string) map[string]string {
	d := map[string]string{KeyGreeting: text}
	if secret != "" {
		d[KeyCredentialSecret] = secret
	}
	return d
}

// CredentialGate decides from the lister's answer for the named Credential whether the
// Greeting may be rendered: the Credential's Secret name, or the waiting Outcome (phase
// Reconciling, requeued after poll). A lister error other than NotFound is returned.
func CredentialGate(name string, cred *kubeosv1alpha1.Credential, err error, poll time.Duration) (string, *lifecycle.Outcome, error) {
	wait := func(msg string) (string, *lifecycle.Outcome, error) {
		return "", &lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "WaitingForCredential",
			Message: msg, RequeueAfter: poll}, nil
	}
	switch {
	case name == "":
		return "", nil, nil
	case apierrors.IsNotFound(err):
		return wait(fmt.Sprintf("credential %s does not exist", name))
	case err != nil:
		return "", nil, fmt.Errorf("credential %s: %w", name, err)
	case cred.DeletionTimestamp != nil:
		return wait(fmt.Sprintf("credential %s is being deleted", name))
	case cred.Status.Phase != lifecycle.PhaseActive || cred.Status.SecretName == "":
		return wait(fmt.Sprintf("credential %s is %s, not Active", name, phaseOrPending(cred.Status.Phase)))
	}
	return cred.Status.SecretName, nil, nil
}

func phaseOrPending(p lifecycle.Phase) lifecycle.Phase {
	if p == lifecycle.PhaseNone {
		return lifecycle.PhasePending
	}
	return p
}

// gate asks the lister about g's Credential.
func (d *Driver) gate(g *examplev1alpha1.Greeting) (string, *lifecycle.Outcome, error) {
	if g.Spec.Credential == "" {
		return "", nil, nil
	}
	cred, err := d.Credentials.Credentials(g.Namespace).Get(g.Spec.Credential)
	return CredentialGate(g.Spec.Credential, cred, err, d.Poll)
}

// Observe finds the ConfigMap and whether it holds what the spec renders to.
func (d *Driver) Observe(ctx context.Context, g *examplev1alpha1.Greeting) (lifecycle.Outcome, error) {
	g.Status.ConfigMap = ConfigMapName(g)
	var cm corev1.ConfigMap
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: ConfigMapName(g)}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return lifecycle.Outcome{}, nil
		}
		return lifecycle.Outcome{}, fmt.Errorf("get configmap %s: %w", ConfigMapName(g), err)
	}
	if cm.Annotations[AnnotationGreeting] != g.Name {
		return lifecycle.Outcome{Reason: "ConfigMapConflict",
			Terminal: fmt.Errorf("configmap %s exists and is not managed by greeting %s", cm.Name, g.Name)}, nil
	}
	secret, wait, err := d.gate(g)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if wait != nil { // rendered before; the Credential went away or is not Active now
		secret = cm.Data[KeyCredentialSecret]
	}
	upToDate := maps.Equal(cm.Data, Data(Render(g.Spec), secret))
	if upToDate {
		g.Status.Text = cm.Data[KeyGreeting]
	}
	return lifecycle.Outcome{Exists: true, UpToDate: upToDate}, nil
}

// Provision creates the ConfigMap once the Credential is Active.
func (d *Driver) Provision(ctx context.Context, g *examplev1alpha1.Greeting) (lifecycle.Outcome, error) {
	secret, wait, err := d.gate(g)
	if err != nil || wait != nil {
		return deref(wait), err
	}
	text := Render(g.Spec)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: ConfigMapName(g),
			Annotations: map[string]string{AnnotationGreeting: g.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(g,
				examplev1alpha1.GroupVersion.WithKind("Greeting"))}},
		Data: Data(text, secret),
	}
	if err := d.Client.Create(ctx, cm); err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("create configmap %s: %w", cm.Name, err)
	}
	g.Status.Text = text
	return lifecycle.Outcome{Reason: "Rendered", Message: "configmap " + cm.Name}, nil
}

// Update rewrites the ConfigMap's data.
func (d *Driver) Update(ctx context.Context, g *examplev1alpha1.Greeting) (lifecycle.Outcome, error) {
	secret, wait, err := d.gate(g)
	if err != nil || wait != nil {
		return deref(wait), err
	}
	var cm corev1.ConfigMap
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: ConfigMapName(g)}, &cm); err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("get configmap %s: %w", ConfigMapName(g), err)
	}
	text := Render(g.Spec)
	cm.Data = Data(text, secret)
	if err := d.Client.Update(ctx, &cm); err != nil {
		return lifecycle.Outcome{}, fmt.Errorf("update configmap %s: %w", cm.Name, err)
	}
	g.Status.Text = text
	return lifecycle.Outcome{Reason: "Rerendered", Message: "configmap " + cm.Name}, nil
}

// Deprovision deletes the ConfigMap, if it is this Greeting's (a foreign one of the same name
// is left alone).
func (d *Driver) Deprovision(ctx context.Context, g *examplev1alpha1.Greeting) (lifecycle.Outcome, error) {
	var cm corev1.ConfigMap
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: ConfigMapName(g)}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return lifecycle.Outcome{Reason: "ConfigMapDeleted"}, nil
		}
		return lifecycle.Outcome{}, fmt.Errorf("get configmap %s: %w", ConfigMapName(g), err)
	}
	if cm.Annotations[AnnotationGreeting] != g.Name {
		return lifecycle.Outcome{Reason: "ConfigMapNotOwned", Message: "configmap " + cm.Name + " is not this greeting's; left alone"}, nil
	}
	if err := d.Client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID}); err != nil && !apierrors.IsNotFound(err) {
		return lifecycle.Outcome{}, fmt.Errorf("delete configmap %s: %w", cm.Name, err)
	}
	return lifecycle.Outcome{Reason: "ConfigMapDeleted"}, nil
}

func deref(o *lifecycle.Outcome) lifecycle.Outcome {
	if o == nil {
		return lifecycle.Outcome{}
	}
	return *o
}
