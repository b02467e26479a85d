package pki

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigName is the cluster and context name in kubeconfigs written by WriteKubeconfig.
const KubeconfigName = "kube"

// WriteKubeconfig writes a self-contained kubeconfig to path (mode 0600, replaced atomically):
// cluster and context "kube" with server and the CA embedded, and user (the entry's name,
// "kube" if empty) holding the embedded client certificate and key. The directory of path is
// created 0700 if missing.
func WriteKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte, user string) (err error) {
	switch {
	case path == "":
		return errors.New("pki: WriteKubeconfig: empty path")
	case server == "":
		return errors.New("pki: WriteKubeconfig: empty server URL")
	case len(caPEM) == 0:
		return errors.New("pki: WriteKubeconfig: empty CA")
	case len(certPEM) == 0 || len(keyPEM) == 0:
		return errors.New("pki: WriteKubeconfig: empty client certificate or key")
	}
	if user == "" {
		user = KubeconfigName
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[KubeconfigName] = &clientcmdapi.Context{Cluster: KubeconfigName, AuthInfo: user}
	cfg.CurrentContext = KubeconfigName

	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: WriteKubeconfig: %w", err)
	}
	// clientcmd.WriteToFile writes in place and keeps an existing file's mode, so it writes a
	// fresh 0600 temporary file which is then renamed over path.
	f, err := os.CreateTemp(dir, "."+base+tmpInfix+"*")
	if err != nil {
		return fmt.Errorf("pki: WriteKubeconfig: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
			err = fmt.Errorf("pki: WriteKubeconfig %s: %w", path, err)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
