package bootstrapsigner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"
	upstream "k8s.io/kubernetes/pkg/controller/bootstrap"
)

// Name is the controller's name (its identity is system:kube-controller:<Name>, its Lease
// kube-<Name>).
const Name = "bootstrap-signer-controller"

// Options configure the controller.
type Options struct {
	// Server is the API server URL joining nodes are told to use. Required.
	Server string
	// CAPEM is the PEM of the CA that signs the server's serving certificate. Required.
	CAPEM []byte
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
}

// Controller publishes and signs cluster-info.
type Controller struct {
	client kubernetes.Interface
	o      Options
}

// New builds the controller on a client configuration; nothing runs until Start.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if o.Server == "" || len(o.CAPEM) == 0 {
		return nil, fmt.Errorf("bootstrapsigner: Server and CAPEM are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{client: cs, o: o}, nil
}

// Kubeconfig is the cluster-info ConfigMap's kubeconfig: one cluster (server and CA), no
// user — kubeadm's content.
func Kubeconfig(server string, caPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	return clientcmd.Write(*cfg)
}

// Start publishes cluster-info, then signs it until ctx ends; it can be called again (a new
// leadership term).
func (c *Controller) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(c.o.Log.Handler()))
	kc, err := Kubeconfig(c.o.Server, c.o.CAPEM)
	if err != nil {
		return err
	}
	for {
		err := c.publish(ctx, string(kc))
		if err == nil {
			err = c.publishAccess(ctx)
		}
		if err == nil {
			break
		}
		c.o.Log.Warn("publishing kube-public/cluster-info", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	opts := upstream.DefaultSignerOptions()
	secrets := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(opts.TokenSecretNamespace))
	cms := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(opts.ConfigMapNamespace))
	signer, err := upstream.NewSigner(c.client, secrets.Core().V1().Secrets(), cms.Core().V1().ConfigMaps(), opts)
	if err != nil {
		return err
	}
	secrets.Start(ctx.Done())
	cms.Start(ctx.Done())
	defer secrets.Shutdown()
	defer cms.Shutdown()
	signer.Run(ctx)
	return nil
}

// Names of kubeadm's Role and RoleBinding that let anyone read cluster-info.
const (
	clusterInfoRole = "kubeadm:bootstrap-signer-clusterinfo"
	anonymousUser   = "system:anonymous"
)

// publishAccess lets anonymous clients get cluster-info (a joining node has no
// credentials the server trusts yet): kubeadm's Role and RoleBinding in kube-public.
func (c *Controller) publishAccess(ctx context.Context) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRole, Namespace: metav1.NamespacePublic},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{bootstrapapi.ConfigMapClusterInfo}}},
	}
	if _, err := c.client.RbacV1().Roles(metav1.NamespacePublic).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("role %s: %w", clusterInfoRole, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRole, Namespace: metav1.NamespacePublic},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: clusterInfoRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: anonymousUser}},
	}
	if _, err := c.client.RbacV1().RoleBindings(metav1.NamespacePublic).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("rolebinding %s: %w", clusterInfoRole, err)
	}
	return nil
}

// publish creates cluster-info, or sets its kubeconfig when it names another server or CA
// (the signatures are then recomputed by the signer).
func (c *Controller) publish(ctx context.Context, kubeconfig string) error {
	cms := c.client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	cm, err := cms.Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
			Data:       map[string]string{bootstrapapi.KubeConfigKey: kubeconfig},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return c.publish(ctx, kubeconfig)
		}
		return err
	case err != nil:
		return err
	case cm.Data[bootstrapapi.KubeConfigKey] == kubeconfig:
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[bootstrapapi.KubeConfigKey] = kubeconfig
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
