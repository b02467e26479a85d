package certificates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/certificates"
	"k8s.io/kubernetes/pkg/controller/certificates/approver"
	"k8s.io/kubernetes/pkg/controller/certificates/cleaner"
	"k8s.io/kubernetes/pkg/controller/certificates/signer"

	"kubeos.dev/kube/internal/controllers/recorder"
	"kubeos.dev/kube/internal/controllers/sharedinformers"
)

// Name names the controller group: its identity is system:kube-controller:<Name>, its
// Lease kube-system/kube-<Name>.
const Name = "certificate-controller"

// DefaultDuration is kube-controller-manager's --cluster-signing-duration default.
const DefaultDuration = 365 * 24 * time.Hour

// Options configure the controller group.
type Options struct {
	// CAFile and CAKeyFile are the PEM files of the CA that signs (the Kube CA,
	// pki.PKI.CAFile and CAKeyFile). Required. They are re-read when they change.
	CAFile, CAKeyFile string
	// Duration caps the lifetime of signed certificates (--cluster-signing-duration);
	// DefaultDuration when zero.
	Duration time.Duration
	// Workers per controller; 5 (kube-controller-manager's) when zero.
	Workers int
	// Log receives the controllers' logs (upstream's klog output included); nil discards.
	Log *slog.Logger
	// Poll is how often Start looks for the CSR kind while the server does not serve it;
	// 2 s when zero.
	Poll time.Duration
}

func (o *Options) complete() error {
	if o.CAFile == "" || o.CAKeyFile == "" {
		return errors.New("certificates: CAFile and CAKeyFile are required")
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Workers <= 0 {
		o.Workers = 5
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	return nil
}

// Controller is the certificate controller group. See the package documentation.
type Controller struct {
	cfg    *rest.Config
	client kubernetes.Interface
	o      Options
}

// New prepares the controllers; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, client: cs, o: o}, nil
}

// Start runs the approving, signing, request-check and cleaning controllers until ctx
// ends. It can be called again after it returned (a new leadership term).
func (c *Controller) Start(ctx context.Context) error {
	if served, err := c.waitServed(ctx); !served {
		return err
	}
	rec, err := recorder.Start(ctx, c.cfg, Name)
	if err != nil {
		return err
	}
	defer rec.Stop()
	// Upstream's controllers log through klog's context logger.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))

	f := sharedinformers.For(ctx, c.client)
	defer f.Shutdown()
	csrs := f.Certificates().V1().CertificateSigningRequests()
	runners, err := c.controllers(ctx, csrs, rec)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, run := range runners {
		wg.Go(func() { run(ctx) })
	}
	c.o.Log.Info("started", "signers", signerNames, "duration", c.o.Duration)
	wg.Wait()
	return nil
}

// signerNames are the signers this controller signs for with the Kube CA.
var signerNames = []string{certificatesv1.KubeAPIServerClientSignerName, certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeletServingSignerName}

// controllers builds upstream's controllers (and the request check) on the shared CSR
// informer and returns their Run functions.
func (c *Controller) controllers(ctx context.Context, inf certinformers.CertificateSigningRequestInformer, rec *recorder.Recorder) ([]func(context.Context), error) {
	workers := c.o.Workers
	var runs []func(context.Context)
	for _, name := range signerNames {
		var s *signer.CSRSigningController
		var err error
		switch name {
		case certificatesv1.KubeAPIServerClientSignerName:
			s, err = signer.NewKubeAPIServerClientCSRSigningController(ctx, c.client, inf, c.o.CAFile, c.o.CAKeyFile, c.o.Duration)
		case certificatesv1.KubeAPIServerClientKubeletSignerName:
			s, err = signer.NewKubeletClientCSRSigningController(ctx, c.client, inf, c.o.CAFile, c.o.CAKeyFile, c.o.Duration)
		case certificatesv1.KubeletServingSignerName:
			s, err = signer.NewKubeletServingCSRSigningController(ctx, c.client, inf, c.o.CAFile, c.o.CAKeyFile, c.o.Duration)
		}
		if err != nil {
			return nil, fmt.Errorf("certificates: signer %s: %w", name, err)
		}
		runs = append(runs, func(ctx context.Context) { s.Run(ctx, workers) })
	}
	a := approver.NewCSRApprovingController(ctx, c.client, inf)
	runs = append(runs, func(ctx context.Context) { a.Run(ctx, workers) })
	check := upstream.NewCertificateController(ctx, "csr-request-check", c.client, inf, func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
		return checkRequest(ctx, c.client, csr, time.Now)
	})
	runs = append(runs, func(ctx context.Context) { check.Run(ctx, 1) })
	cl := cleaner.NewCSRCleanerController(c.client.CertificatesV1().CertificateSigningRequests(), inf)
	runs = append(runs, func(ctx context.Context) { cl.Run(ctx, 1) })
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*certificatesv1.CertificateSigningRequest)
			n, ok2 := obj.(*certificatesv1.CertificateSigningRequest)
			if ok1 && ok2 {
				recordOutcome(rec, o, n)
			}
		},
	}); err != nil {
		return nil, err
	}
	return runs, nil
}

// waitServed waits until the server serves certificatesigningrequests: false when ctx
// ended first.
func (c *Controller) waitServed(ctx context.Context) (bool, error) {
	logged := false
	for {
		l, err := c.client.Discovery().ServerResourcesForGroupVersion(certificatesv1.SchemeGroupVersion.String())
		if err == nil {
			for _, r := range l.APIResources {
				if r.Name == "certificatesigningrequests" {
					return true, nil
				}
			}
		}
		if !logged {
			c.o.Log.Info("waiting until the server serves certificatesigningrequests")
			logged = true
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(c.o.Poll):
		}
	}
}
