package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server"
)

func newCertsCommand(out io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Client certificates signed by the server's CA",
	}
	cmd.AddCommand(newCertsUserCommand(out))
	return cmd
}

func newCertsUserCommand(out io.Writer) *cobra.Command {
	var dataDir, pkiDir, output string
	var groups []string
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "user NAME",
		Short: "Mint a client certificate for a user and write a kubeconfig for it",
		Long: `Mint a client certificate for user NAME (the certificate's CN) in the given groups (its O
values), signed by the CA in the data directory, and write a kubeconfig that reaches the
server the admin kubeconfig of the data directory points at. The user has no rights until
RBAC grants them, e.g.:

  kubectl create rolebinding alice-edit --clusterrole=edit --user=alice -n team-a`,
		Example: "  kube certs user alice --group developers -o alice.kubeconfig",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			if dataDir == "" {
				dataDir = server.DefaultDataDir()
			}
			if pkiDir == "" {
				pkiDir = filepath.Join(dataDir, "pki")
			}
			if output == "" {
				output = user + ".kubeconfig"
			}
			if validity < 0 {
				return errors.New("--validity must not be negative")
			}
			admin, err := clientcmd.LoadFromFile(filepath.Join(dataDir, "kubeconfig"))
			if err != nil {
				return fmt.Errorf("reading the admin kubeconfig of --data-dir %s: %w", dataDir, err)
			}
			cluster := admin.Clusters[pki.KubeconfigName]
			if ctx := admin.Contexts[admin.CurrentContext]; ctx != nil && admin.Clusters[ctx.Cluster] != nil {
				cluster = admin.Clusters[ctx.Cluster]
			}
			if cluster == nil || cluster.Server == "" {
				return fmt.Errorf("the admin kubeconfig in %s names no server", dataDir)
			}
			ca, err := pki.LoadCA(pkiDir)
			if err != nil {
				return err
			}
			certPEM, keyPEM, err := ca.IssueClientCert(user, groups, validity)
			if err != nil {
				return err
			}
			if err := pki.WriteKubeconfig(output, cluster.Server, ca.CAPEM, certPEM, keyPEM, user); err != nil {
				return err
			}
			fmt.Fprintf(out, "Kubeconfig for user %q (groups %q) written to %s\n", user, groups, output)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "the server's data directory (default "+server.DefaultDataDir()+")")
	f.StringVar(&pkiDir, "pki-dir", "", "the server's PKI directory (default <data-dir>/pki)")
	f.StringSliceVar(&groups, "group", nil, "group of the user (repeatable or comma-separated)")
	f.StringVarP(&output, "output", "o", "", "kubeconfig path to write (default NAME.kubeconfig)")
	f.DurationVar(&validity, "validity", 0, "certificate lifetime (default one year)")
	return cmd
}
