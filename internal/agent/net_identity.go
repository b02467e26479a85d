package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
	kubeletcert "k8s.io/kubernetes/pkg/kubelet/certificate"

	"kubeos.dev/kube/internal/rbac"
)

// The networking identity (issue 19): the Service proxy, the cluster DNS, NetworkPolicy
// and the node routes read Services, EndpointSlices, Pods, Namespaces, NetworkPolicies and
// Nodes cluster-wide, which the Node authorizer rightly refuses a node. They act instead as
// NetworkingUser(node) in rbac.NodeNetworkingGroup (bound to kube:node-networking), a
// client certificate the agent asks for with a CSR for the kubernetes.io/kube-apiserver-
// client signer made with its node identity; the server approves exactly such CSRs from
// that node (CheckNetworkingCSR) and signs them. An agent whose own identity already
// carries the group (kube server --agent) uses it as it is.

// NetworkingUserPrefix prefixes the networking identity's user name; the node's name follows.
const NetworkingUserPrefix = "kubeos.dev:node-networking:"

// NetworkingUser is node's networking identity.
func NetworkingUser(node string) string { return NetworkingUserPrefix + node }

// networkingUsages are the key usages the CSR asks for.
var networkingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// CheckNetworkingCSR says whether csr is a node's request for its own networking identity:
// signer kubernetes.io/kube-apiserver-client, requested by system:node:<node> in
// system:nodes, subject exactly CN=NetworkingUser(node), O=rbac.NodeNetworkingGroup, no
// subject alternative names, client-auth usages only. It returns the node, or why not. Pure.
func CheckNetworkingCSR(csr *certificatesv1.CertificateSigningRequest) (string, error) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return "", fmt.Errorf("signer %q", csr.Spec.SignerName)
	}
	node, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
	if !ok || node == "" || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return "", fmt.Errorf("requested by %q %v, not a node", csr.Spec.Username, csr.Spec.Groups)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return "", errors.New("no PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("certificate request: %w", err)
	}
	if req.Subject.CommonName != NetworkingUser(node) {
		return "", fmt.Errorf("common name %q, want %q", req.Subject.CommonName, NetworkingUser(node))
	}
	if !slices.Equal(req.Subject.Organization, []string{rbac.NodeNetworkingGroup}) {
		return "", fmt.Errorf("organization %v, want [%s]", req.Subject.Organization, rbac.NodeNetworkingGroup)
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return "", errors.New("subject alternative names requested")
	}
	allowed := sets.New(certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageClientAuth) {
		return "", errors.New("no client auth usage")
	}
	for _, u := range csr.Spec.Usages {
		if !allowed.Has(u) {
			return "", fmt.Errorf("usage %q", u)
		}
	}
	return node, nil
}

// netClients holds each running agent's networking client (see networkingClient).
var netClients sync.Map // *Agent → kubernetes.Interface

// netClient is the client the networking components use: the networking identity's once
// networkingClient made it, else the node's.
func (a *Agent) netClient() kubernetes.Interface {
	if c, ok := netClients.Load(a); ok {
		return c.(kubernetes.Interface)
	}
	return a.client
}

// networkingClient makes the networking identity's client: the node's own when its
// identity is in rbac.NodeNetworkingGroup already; else a certificate for
// NetworkingUser(node) kept in <data-dir>/pki/kube-networking-*.pem and renewed by
// client-go's certificate manager, asked for with the node's client. It waits for the
// first certificate until ctx ends (a server that does not approve such CSRs: `kubectl
// certificate approve` does).
func (a *Agent) networkingClient(ctx context.Context) (kubernetes.Interface, error) {
	ssr, err := a.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		a.log.Warn("networking identity: SelfSubjectReview failed; the networking acts as the node", "err", err)
		return a.client, nil
	}
	if slices.Contains(ssr.Status.UserInfo.Groups, rbac.NodeNetworkingGroup) {
		return a.client, nil
	}
	pki := filepath.Join(a.opts.DataDir, "pki")
	store, err := certificate.NewFileStore("kube-networking", pki, pki, "", "")
	if err != nil {
		return nil, fmt.Errorf("agent: networking certificate store: %w", err)
	}
	logCtx := klog.NewContext(ctx, klog.Background())
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return a.client, nil },
		Template: &x509.CertificateRequest{Subject: pkix.Name{CommonName: NetworkingUser(a.opts.NodeName),
			Organization: []string{rbac.NodeNetworkingGroup}}},
		SignerName:       certificatesv1.KubeAPIServerClientSignerName,
		Usages:           networkingUsages,
		CertificateStore: store,
		Name:             "networking",
		Ctx:              &logCtx,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: networking certificate manager: %w", err)
	}
	m.Start()
	go func() { <-ctx.Done(); m.Stop() }()
	a.log.Info("networking identity: waiting for its certificate", "user", NetworkingUser(a.opts.NodeName))
	for m.Current() == nil {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent: networking identity %s: no certificate: %w", NetworkingUser(a.opts.NodeName), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	cfg := rest.CopyConfig(a.opts.Config)
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password, cfg.ExecProvider, cfg.AuthProvider = "", "", "", "", nil, nil
	if _, err := kubeletcert.UpdateTransport(klog.Background(), ctx.Done(), cfg, m, 0); err != nil {
		return nil, fmt.Errorf("agent: networking identity transport: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: networking client: %w", err)
	}
	a.log.Info("networking identity ready", "user", NetworkingUser(a.opts.NodeName))
	return cs, nil
}
