package leader

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Namespace holds the Leases of the built-in controller groups.
const Namespace = "kube-system"

// Default timings. A candidate takes over a dead leader's Lease within LeaseDuration plus
// one RetryPeriod of the last renewal it observed.
const (
	DefaultLeaseDuration = 10 * time.Second
	DefaultRenewDeadline = 7 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Options configure one election.
type Options struct {
	// Name is the Lease's name in kube-system, one per controller group. Required.
	Name string
	// Identity tells this process from the other candidates; it is the Lease's
	// holderIdentity while this process leads. Required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to the Default* constants.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Log receives leadership changes; nil discards them.
	Log *slog.Logger
}

func (o *Options) complete() error {
	if o.Name == "" || o.Identity == "" {
		return fmt.Errorf("leader election: Name and Identity are required")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Run runs start while this process holds the Lease name in kube-system, until ctx ends.
// See the package documentation.
func Run(ctx context.Context, cfg *rest.Config, name, identity string, start func(ctx context.Context)) error {
	return RunWithOptions(ctx, cfg, Options{Name: name, Identity: identity}, start)
}

// RunWithOptions is Run with explicit timings and a logger.
func RunWithOptions(ctx context.Context, cfg *rest.Config, o Options, start func(ctx context.Context)) error {
	if err := o.complete(); err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	// Renewals must not queue behind the controllers' own requests.
	cfg.Timeout = o.RenewDeadline
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: o.Name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
	}
	for ctx.Err() == nil {
		if err := runTerm(ctx, lock, o, start); err != nil {
			return err
		}
	}
	return nil
}

// runTerm campaigns once and, if it wins, runs start until the Lease is lost or ctx ends.
func runTerm(ctx context.Context, lock resourcelock.Interface, o Options, start func(ctx context.Context)) error {
	// The elector gets its own context so that, on shutdown, the Lease is released only
	// after start has returned: no two leaders run at once.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	leading := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            o.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) { leading <- lctx },
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				o.Log.Info("leader", "lease", o.Name, "holder", id, "self", id == o.Identity)
			},
		},
	})
	if err != nil {
		return err
	}
	electionDone := make(chan struct{})
	go func() { defer close(electionDone); le.Run(electCtx) }()
	select {
	case lctx := <-leading:
		o.Log.Info("started leading", "lease", o.Name)
		runCtx, cancel := context.WithCancel(lctx)
		stop := context.AfterFunc(ctx, cancel)
		start(runCtx)
		stop()
		cancel()
		if ctx.Err() == nil {
			o.Log.Warn("lost the lease; controllers stopped", "lease", o.Name)
		}
	case <-electionDone:
	case <-ctx.Done():
	}
	stopElecting()
	<-electionDone
	return nil
}
