package greeting

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "kubeos.dev/kube/examples/operator/api/v1alpha1"
	"kubeos.dev/kube/internal/server/servertest"
	kubeosv1alpha1 "kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/client/clientset/versioned"
	"kubeos.dev/kube/pkg/lifecycle"
)

var (
	srv *servertest.Server
	cfg *rest.Config
)

// TestMain starts one kube server and runs the operator against it in-process, as
// `go run ./examples/operator` would against a real one.
func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	cfg, err = srv.Config()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logOut io.Writer = io.Discard
	if testing.Verbose() {
		logOut = os.Stderr
	}
	go func() {
		done <- Run(ctx, Options{Config: cfg, Log: slog.New(slog.NewTextHandler(logOut, nil)), Poll: 200 * time.Millisecond})
	}()
	// Run installs the CRD first: wait until Greetings are served.
	if err := waitServed(ctx, done); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		code = 1
	}
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitServed polls until Greetings can be listed (the operator has installed its CRD), or the
// operator stopped, or a minute passed.
func waitServed(ctx context.Context, done chan error) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err == nil {
			if err = c.List(ctx, &examplev1alpha1.GreetingList{}); err == nil {
				return nil
			}
		}
		select {
		case rerr := <-done:
			return fmt.Errorf("operator stopped before greetings were served: %v", rerr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("greetings not served within a minute: %v", err)
		}
	}
}

func clients(t *testing.T) (client.Client, *kubernetes.Clientset, *versioned.Clientset) {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, core, kc
}

func namespace(t *testing.T, core *kubernetes.Clientset, name string) {
	t.Helper()
	if _, err := core.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitGreeting polls until cond holds for the Greeting and returns it.
func waitGreeting(t *testing.T, c client.Client, ns, name string, what string, cond func(*examplev1alpha1.Greeting) bool) *examplev1alpha1.Greeting {
	t.Helper()
	var g examplev1alpha1.Greeting
	servertest.Eventually(t, time.Minute, 50*time.Millisecond, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &g); err != nil {
			return err
		}
		if !cond(&g) {
			return fmt.Errorf("greeting %s/%s not %s: phase %q conditions %+v", ns, name, what, g.Status.Phase, g.Status.Conditions)
		}
		return nil
	})
	return &g
}

// TestGreetingWaitsForCredentialThenActive: a Greeting naming a Credential that does not
// exist yet waits in Reconciling (WaitingForCredential); once the server's engine makes the
// Credential Active, the operator renders the ConfigMap and the Greeting is Active. A spec
// change re-renders; the CRD refuses an illegal phase write; deleting the Greeting removes
// the ConfigMap and the finalizer.
func TestGreetingWaitsForCredentialThenActive(t *testing.T) {
	c, core, kc := clients(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "greet-a"
	namespace(t, core, ns)

	g := &examplev1alpha1.Greeting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec: examplev1alpha1.GreetingSpec{Message: "Hello", To: "world", Credential: "greeter-token"}}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitGreeting(t, c, ns, "hello", "waiting for its credential", func(g *examplev1alpha1.Greeting) bool {
		r := meta.FindStatusCondition(g.Status.Conditions, lifecycle.ConditionReconciling)
		return g.Status.Phase == lifecycle.PhaseReconciling && r != nil && r.Reason == "WaitingForCredential" &&
			strings.Contains(r.Message, "credential greeter-token does not exist")
	})
	if _, err := core.CoreV1().ConfigMaps(ns).Get(ctx, "hello-greeting", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap before the credential is Active: %v, want NotFound", err)
	}

	// The built-in Credential, through the generated clientset; kube server's engine runs it.
	if _, err := kc.KubeosV1alpha1().Credentials(ns).Create(ctx, &kubeosv1alpha1.Credential{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter-token"},
		Spec:       kubeosv1alpha1.CredentialSpec{Type: kubeosv1alpha1.CredentialToken},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	active := waitGreeting(t, c, ns, "hello", "Active", func(g *examplev1alpha1.Greeting) bool {
		return g.Status.Phase == lifecycle.PhaseActive
	})
	if active.Status.Text != "Hello, world!" || active.Status.ConfigMap != "hello-greeting" {
		t.Fatalf("active status text %q configMap %q", active.Status.Text, active.Status.ConfigMap)
	}
	if !controllerHasFinalizer(active) {
		t.Fatalf("finalizers %v, want %s", active.Finalizers, lifecycle.Finalizer)
	}
	cm, err := core.CoreV1().ConfigMaps(ns).Get(ctx, "hello-greeting", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[KeyGreeting] != "Hello, world!" || cm.Data[KeyCredentialSecret] != "greeter-token" {
		t.Fatalf("configmap data %v", cm.Data)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != active.UID {
		t.Fatalf("configmap owners %+v, want the greeting", cm.OwnerReferences)
	}

	// A spec change is re-rendered (Active → Reconciling → Active).
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		var cur examplev1alpha1.Greeting
		if err := c.Get(ctx, client.ObjectKeyFromObject(active), &cur); err != nil {
			return err
		}
		cur.Spec.Message = "Goodbye"
		return c.Update(ctx, &cur)
	})
	waitGreeting(t, c, ns, "hello", "re-rendered", func(g *examplev1alpha1.Greeting) bool {
		return g.Status.Phase == lifecycle.PhaseActive && g.Status.Text == "Goodbye, world!" && g.Status.ObservedGeneration == g.Generation
	})
	if cm, err := core.CoreV1().ConfigMaps(ns).Get(ctx, "hello-greeting", metav1.GetOptions{}); err != nil || cm.Data[KeyGreeting] != "Goodbye, world!" {
		t.Fatalf("configmap after the change: %v %v", cm.Data, err)
	}

	// Greeting's transition table is on the server: Active → Failed is refused for any client.
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		var cur examplev1alpha1.Greeting
		if err := c.Get(ctx, client.ObjectKeyFromObject(active), &cur); err != nil {
			return err
		}
		cur.Status.Phase = lifecycle.PhaseFailed
		err := c.Status().Update(ctx, &cur)
		if apierrors.IsConflict(err) {
			return err
		}
		if !apierrors.IsInvalid(err) {
			t.Fatalf("status Active → Failed: %v, want 422 Invalid", err)
		}
		return nil
	})

	if err := c.Delete(ctx, active); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, time.Minute, 50*time.Millisecond, func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(active), &examplev1alpha1.Greeting{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("greeting still there (%v)", err)
		}
		if _, err := core.CoreV1().ConfigMaps(ns).Get(ctx, "hello-greeting", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("configmap still there (%v)", err)
		}
		return nil
	})
}

// TestGreetingConflictFails: a ConfigMap of the same name that the operator did not write
// is never overwritten; the Greeting goes to Failed (through Reconciling, as its transition
// table requires) with the reason ConfigMapConflict.
func TestGreetingConflictFails(t *testing.T) {
	c, core, _ := clients(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "greet-b"
	namespace(t, core, ns)
	if _, err := core.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken-greeting"},
		Data: map[string]string{"mine": "yes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &examplev1alpha1.Greeting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: examplev1alpha1.GreetingSpec{Message: "Hi", To: "there"}}); err != nil {
		t.Fatal(err)
	}
	failed := waitGreeting(t, c, ns, "taken", "Failed", func(g *examplev1alpha1.Greeting) bool {
		return g.Status.Phase == lifecycle.PhaseFailed
	})
	st := meta.FindStatusCondition(failed.Status.Conditions, lifecycle.ConditionStalled)
	if st == nil || st.Status != metav1.ConditionTrue || st.Reason != "ConfigMapConflict" {
		t.Fatalf("stalled condition %+v, want True ConfigMapConflict", st)
	}
	cm, err := core.CoreV1().ConfigMaps(ns).Get(ctx, "taken-greeting", metav1.GetOptions{})
	if err != nil || cm.Data["mine"] != "yes" || len(cm.Data) != 1 {
		t.Fatalf("foreign configmap changed: %v %v", cm.Data, err)
	}
	// Deleting the failed Greeting leaves the foreign ConfigMap in place.
	if err := c.Delete(ctx, failed); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(failed), &examplev1alpha1.Greeting{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("greeting still there (%v)", err)
		}
		return nil
	})
	if _, err := core.CoreV1().ConfigMaps(ns).Get(ctx, "taken-greeting", metav1.GetOptions{}); err != nil {
		t.Fatalf("foreign configmap after the greeting's deletion: %v", err)
	}
}

func controllerHasFinalizer(g *examplev1alpha1.Greeting) bool {
	for _, f := range g.Finalizers {
		if f == lifecycle.Finalizer {
			return true
		}
	}
	return false
}
