package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/simnode"
)

// simCommands are the top-level commands of the sim area: `kube sim` runs simulated
// nodes against any server, as their own process.
func simCommands(out, errOut io.Writer) []*cobra.Command {
	var o simnode.Options
	var kubeconfig, logLevel string
	var statsEvery time.Duration
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run simulated nodes against a Kubernetes API server (as kube server --sim-nodes does)",
		Long: "Registers --nodes Nodes and plays their kubelets: Lease renewals, node status, and every pod bound to them\n" +
			"moved through a kubelet's statuses by a stage table. Writes impersonate each node (system:node:<name>, group\n" +
			"system:nodes), so the kubeconfig's user must be allowed to impersonate (cluster-admin is).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(errOut, logLevel)
			if err != nil {
				return err
			}
			setDefaultGCPercent()
			o.Complete()
			if err := o.Validate(""); err != nil {
				return err
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			cfg.UserAgent = "kube-sim"
			sim, err := simnode.New(cfg, o, log)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			if statsEvery > 0 {
				go logStats(ctx, sim, out, statsEvery)
			}
			return sim.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the server (default $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.DurationVar(&statsEvery, "stats-interval", 0, "print the simulator's counters this often (0: never)")
	addSimulatorFlags(f, &o, "")
	return []*cobra.Command{cmd}
}

func logStats(ctx context.Context, sim *simnode.Simulator, out io.Writer, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st := sim.Stats()
			fmt.Fprintf(out, "%s pod-patches=%d pod-deletes=%d lease-renewals=%d node-status=%d errors=%d\n",
				time.Now().UTC().Format(time.RFC3339), st.PodPatches, st.PodDeletes, st.LeaseRenewals, st.NodeStatusReports, st.Errors)
		}
	}
}
