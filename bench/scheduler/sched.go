package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/scheduler"
)

// sched runs Kube's scheduler (internal/scheduler, upstream's default profile) against a
// kubeconfig in this process until SIGTERM or SIGINT, so that bench measures it as its own
// process beside kube-scheduler's (/proc CPU compares like with like). No leader election:
// the bench server runs with --scheduler=false.
func sched(args []string) error {
	fs := flag.NewFlagSet("sched", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "the server's kubeconfig")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run here")
	noEquiv := fs.Bool("no-equiv", false, "turn the scheduler's equivalence cache off (the code before it)")
	_ = fs.Parse(args)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	s, err := scheduler.New(cfg, scheduler.Options{Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), NoEquivalenceCache: *noEquiv})
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = s.Start(ctx)
	fh, fm, sh, sm := s.EquivalenceCacheStats()
	fmt.Fprintf(os.Stderr, "equivalence cache: filter hits %d misses %d, score hits %d misses %d\n", fh, fm, sh, sm)
	return err
}
