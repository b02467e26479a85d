package greeting

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1alpha1 "kubeos.dev/kube/examples/operator/api/v1alpha1"
	kubeosv1alpha1 "kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

func TestRenderAndData(t *testing.T) {
	if got := Render(examplev1alpha1.GreetingSpec{Message: "Hello", To: "world"}); got != "Hello, world!" {
		t.Fatalf("Render = %q", got)
	}
	if d := Data("Hi, x!", ""); len(d) != 1 || d[KeyGreeting] != "Hi, x!" {
		t.Fatalf("Data without secret = %v", d)
	}
	if d := Data("Hi, x!", "s"); len(d) != 2 || d[KeyCredentialSecret] != "s" {
		t.Fatalf("Data with secret = %v", d)
	}
}

func TestCredentialGate(t *testing.T) {
	cred := func(phase lifecycle.Phase, secret string, deleting bool) *kubeosv1alpha1.Credential {
		c := &kubeosv1alpha1.Credential{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		c.Status.Phase, c.Status.SecretName = phase, secret
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		return c
	}
	notFound := apierrors.NewNotFound(kubeosv1alpha1.Resource("credential"), "c")
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		ref        string
		cred       *kubeosv1alpha1.Credential
		err        error
		wantSecret string
		wantWait   string // message of the waiting outcome ("" : not waiting)
		wantErr    bool
	}{
		{name: "no credential named", ref: ""},
		{name: "missing", ref: "c", err: notFound, wantWait: "credential c does not exist"},
		{name: "lister fails", ref: "c", err: boom, wantErr: true},
		{name: "fresh", ref: "c", cred: cred("", "", false), wantWait: "credential c is Pending, not Active"},
		{name: "reconciling", ref: "c", cred: cred(lifecycle.PhaseReconciling, "c", false), wantWait: "credential c is Reconciling, not Active"},
		{name: "failed", ref: "c", cred: cred(lifecycle.PhaseFailed, "c", false), wantWait: "credential c is Failed, not Active"},
		{name: "active without secret yet", ref: "c", cred: cred(lifecycle.PhaseActive, "", false), wantWait: "credential c is Active, not Active"},
		{name: "deleting", ref: "c", cred: cred(lifecycle.PhaseActive, "c", true), wantWait: "credential c is being deleted"},
		{name: "active", ref: "c", cred: cred(lifecycle.PhaseActive, "c-secret", false), wantSecret: "c-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret, wait, err := CredentialGate(tc.ref, tc.cred, tc.err, 3*time.Second)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if secret != tc.wantSecret {
				t.Errorf("secret = %q, want %q", secret, tc.wantSecret)
			}
			switch {
			case tc.wantWait == "" && wait != nil:
				t.Errorf("waiting %+v, want none", *wait)
			case tc.wantWait != "" && wait == nil:
				t.Errorf("not waiting, want %q", tc.wantWait)
			case wait != nil:
				if wait.Message != tc.wantWait || wait.Phase != lifecycle.PhaseReconciling ||
					wait.Reason != "WaitingForCredential" || wait.RequeueAfter != 3*time.Second {
					t.Errorf("waiting %+v, want %q in Reconciling, requeued after 3s", *wait, tc.wantWait)
				}
			}
		})
	}
}

// TestTransitions: Greeting's table is valid, narrower than the default (no Active → Failed
// or Pending → Failed), and the engine's Step reaches Failed through Reconciling.
func TestTransitions(t *testing.T) {
	tt := examplev1alpha1.Transitions()
	if err := tt.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to lifecycle.Phase
		ok       bool
	}{
		{lifecycle.PhasePending, lifecycle.PhaseReconciling, true},
		{lifecycle.PhaseReconciling, lifecycle.PhaseActive, true},
		{lifecycle.PhaseActive, lifecycle.PhaseReconciling, true},
		{lifecycle.PhaseReconciling, lifecycle.PhaseFailed, true},
		{lifecycle.PhaseFailed, lifecycle.PhaseReconciling, true},
		{lifecycle.PhaseActive, lifecycle.PhaseDeleting, true},
		{lifecycle.PhaseActive, lifecycle.PhaseFailed, false},
		{lifecycle.PhasePending, lifecycle.PhaseFailed, false},
		{lifecycle.PhasePending, lifecycle.PhaseActive, false},
		{lifecycle.PhaseDeleting, lifecycle.PhaseActive, false},
	} {
		if got := tt.Allowed(c.from, c.to); got != c.ok {
			t.Errorf("Allowed(%s → %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
	for _, from := range []lifecycle.Phase{lifecycle.PhasePending, lifecycle.PhaseActive} {
		if next, err := tt.Step(from, lifecycle.PhaseFailed); err != nil || next != lifecycle.PhaseReconciling {
			t.Errorf("Step(%s → Failed) = %s, %v; want Reconciling first", from, next, err)
		}
	}
	if def := lifecycle.DefaultTransitions(); !def.Allowed(lifecycle.PhaseActive, lifecycle.PhaseFailed) {
		t.Fatal("the default table allows Active → Failed; Greeting's is meant to be narrower")
	}
}
