package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	kubeletcertificate "k8s.io/kubernetes/pkg/kubelet/certificate"
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

// RotatingConfig is the API client configuration of a bootstrapped node (Bootstrap made
// its kubeconfig in dataDir) whose client certificate is renewed before it expires, as the
// kubelet's --rotate-certificates does with upstream's certificate manager: at a jittered
// 70–90% of its lifetime it sends a new CSR for system:node:<nodeName> (approved by the
// server as selfnodeclient), stores the signed certificate in dataDir/pki
// (kubelet-client-current.pem) and moves the client's connections to it. The rotation
// stops when ctx ends.
func RotatingConfig(ctx context.Context, dataDir, nodeName string, log *slog.Logger) (*rest.Config, error) {
	certDir := filepath.Join(dataDir, "pki")
	logger := klog.FromContext(ctx)
	certConfig, clientConfig, err := bootstrap.LoadClientConfig(logger, filepath.Join(dataDir, "kubeconfig"), filepath.Join(dataDir, "bootstrap.kubeconfig"), certDir)
	if err != nil {
		return nil, fmt.Errorf("agent certificate rotation: %w", err)
	}
	mgr, err := kubeletcertificate.NewKubeletClientCertificateManager(certDir, types.NodeName(nodeName),
		clientConfig.CertData, clientConfig.KeyData, clientConfig.CertFile, clientConfig.KeyFile,
		func(current *tls.Certificate) (kubernetes.Interface, error) {
			// With a valid certificate the node renews as itself, else with the bootstrap token.
			if current != nil {
				return kubernetes.NewForConfig(clientConfig)
			}
			return kubernetes.NewForConfig(certConfig)
		})
	if err != nil {
		return nil, fmt.Errorf("agent certificate rotation: %w", err)
	}
	cfg := rest.AnonymousClientConfig(clientConfig)
	// exitAfter 0: an agent whose certificate lapsed keeps retrying rather than exiting
	// (the in-process agent shares its process with the server).
	if _, err := kubeletcertificate.UpdateTransport(logger, ctx.Done(), cfg, mgr, 0); err != nil {
		return nil, fmt.Errorf("agent certificate rotation: %w", err)
	}
	mgr.Start()
	context.AfterFunc(ctx, mgr.Stop)
	if c := mgr.Current(); c != nil && c.Leaf != nil {
		log.Info("client certificate rotation on", "notAfter", c.Leaf.NotAfter)
	}
	return cfg, nil
}
