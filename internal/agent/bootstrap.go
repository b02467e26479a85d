package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"
)

// BootstrapOptions are what joining a cluster with a bootstrap token needs.
type BootstrapOptions struct {
	DataDir, Server, Token, CAFile, NodeName string
}

// Bootstrap obtains the node's client certificate as the kubelet's TLS bootstrap does
// (upstream's code): with the bootstrap token it sends a CSR for system:node:<name> to the
// kubernetes.io/kube-apiserver-client-kubelet signer, waits for the server to approve and
// sign it, and writes a kubeconfig of that identity into the data directory, whose path it
// returns. A still-valid kubeconfig there is kept.
func Bootstrap(ctx context.Context, o BootstrapOptions) (string, error) {
	if o.Server == "" || o.Token == "" || o.CAFile == "" {
		return "", errors.New("agent bootstrap: --server, --token and --certificate-authority are required")
	}
	ca, err := os.ReadFile(o.CAFile)
	if err != nil {
		return "", fmt.Errorf("agent bootstrap: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(o.DataDir, "pki"), 0o700); err != nil {
		return "", err
	}
	bc := clientcmdapi.NewConfig()
	bc.Clusters["kube"] = &clientcmdapi.Cluster{Server: o.Server, CertificateAuthorityData: ca}
	bc.AuthInfos["bootstrap"] = &clientcmdapi.AuthInfo{Token: o.Token}
	bc.Contexts["bootstrap"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "bootstrap"}
	bc.CurrentContext = "bootstrap"
	bootstrapPath := filepath.Join(o.DataDir, "bootstrap.kubeconfig")
	if err := clientcmd.WriteToFile(*bc, bootstrapPath); err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(o.DataDir, "kubeconfig")
	if err := bootstrap.LoadClientCert(ctx, kubeconfig, bootstrapPath, filepath.Join(o.DataDir, "pki"), types.NodeName(o.NodeName)); err != nil {
		return "", fmt.Errorf("agent bootstrap: %w", err)
	}
	return kubeconfig, nil
}
