package greeting

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	examplev1alpha1 "kubeos.dev/kube/examples/operator/api/v1alpha1"
	"kubeos.dev/kube/pkg/client/clientset/versioned"
	"kubeos.dev/kube/pkg/client/informers/externalversions"
	"kubeos.dev/kube/pkg/lifecycle"
)

// Options configure the operator.
type Options struct {
	// Config reaches the API server (kube server's admin kubeconfig in the README).
	Config *rest.Config
	// Log is the operator's logger (default: discard).
	Log *slog.Logger
	// Poll is how soon a Greeting waiting for its Credential looks again (default 1s).
	Poll time.Duration
	// MaxConcurrentReconciles is the engine's worker count for Greetings (default 2).
	MaxConcurrentReconciles int
}

func (o *Options) complete() error {
	if o.Config == nil {
		return fmt.Errorf("greeting operator: Options.Config is required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 2
	}
	if o.Poll < 0 || o.MaxConcurrentReconciles < 0 {
		return fmt.Errorf("greeting operator: Poll and MaxConcurrentReconciles must not be negative")
	}
	return nil
}

// Scheme has client-go's kinds and Greeting.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := examplev1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Run installs the Greeting CRD and runs the operator until ctx ends.
func Run(ctx context.Context, o Options) error {
	if err := o.complete(); err != nil {
		return err
	}
	if err := InstallCRD(ctx, o.Config, examplev1alpha1.CRD()); err != nil {
		return err
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}

	// The generated clients: a shared informer on Credentials, read through its lister.
	kubeos, err := versioned.NewForConfig(o.Config)
	if err != nil {
		return fmt.Errorf("kubeos.dev clientset: %w", err)
	}
	factory := externalversions.NewSharedInformerFactory(kubeos, 0)
	credentials := factory.Kubeos().V1alpha1().Credentials()
	lister := credentials.Lister() // registers the informer before Start
	ctx, cancel := context.WithCancel(ctx)
	defer factory.Shutdown() // waits for the informers, which stop on cancel (run first)
	defer cancel()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer for %v did not sync: %w", typ, ctx.Err())
		}
	}

	engine, err := lifecycle.NewEngine(lifecycle.EngineOptions{Log: o.Log.With("component", "lifecycle")})
	if err != nil {
		return err
	}
	mgr, err := manager.New(o.Config, manager.Options{
		Scheme: scheme, Logger: logr.FromSlogHandler(o.Log.Handler()),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	driver := &Driver{Client: mgr.GetClient(), Credentials: lister, Poll: o.Poll}
	if err := lifecycle.Register(engine, lifecycle.KindOptions[*examplev1alpha1.Greeting]{
		Kind:                    "Greeting",
		New:                     func() *examplev1alpha1.Greeting { return &examplev1alpha1.Greeting{} },
		Driver:                  driver,
		Transitions:             examplev1alpha1.Transitions(),
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
	}); err != nil {
		return err
	}
	if err := engine.SetupWithManager(mgr); err != nil {
		return err
	}
	o.Log.Info("greeting operator running")
	return mgr.Start(ctx) // drains in-flight reconciles before it returns
}

// InstallCRD creates or updates crd and waits until it is Established.
func InstallCRD(ctx context.Context, cfg *rest.Config, crd *apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	cur, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = crds.Create(ctx, crd, metav1.CreateOptions{})
	case err == nil:
		cur.Spec = crd.Spec
		_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", crd.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cur, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
	}
	return nil
}
