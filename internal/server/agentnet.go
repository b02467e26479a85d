package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"kubeos.dev/kube/internal/agent"
)

// AgentNetworkingApproverName names the controller approving the node agents' networking
// identities (agent.CheckNetworkingCSR): identity system:kube-controller:<name>, Lease
// kube-system/kube-<name>.
const AgentNetworkingApproverName = "agent-networking-approver"

// agentNetworkingApprover is the electedController to add to electedControllers (before
// certificate-controller, whose signer then signs what it approved).
var agentNetworkingApprover = electedController{name: AgentNetworkingApproverName,
	new: func(_ *Server, cfg *rest.Config, log *slog.Logger) (starter, error) {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return &networkingApprover{client: cs, log: log}, nil
	}}

// networkingApprover approves the CSRs that agent.CheckNetworkingCSR accepts (condition
// Approved, reason AutoApproved) and leaves every other CSR alone.
type networkingApprover struct {
	client kubernetes.Interface
	log    *slog.Logger
}

func (c *networkingApprover) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(c.client, 0)
	inf := f.Certificates().V1().CertificateSigningRequests()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { q.Add(o.(*certificatesv1.CertificateSigningRequest).Name) },
		UpdateFunc: func(_, o any) { q.Add(o.(*certificatesv1.CertificateSigningRequest).Name) },
	}); err != nil {
		return err
	}
	lister := inf.Lister()
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil
	}
	go func() { <-ctx.Done(); q.ShutDown() }()
	for {
		name, quit := q.Get()
		if quit {
			return nil
		}
		csr, err := lister.Get(name)
		if err == nil {
			err = c.approve(ctx, csr)
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("networking identity CSR", "csr", name, "err", err)
			q.AddRateLimited(name)
		} else {
			q.Forget(name)
		}
		q.Done(name)
	}
}

// approve approves csr when it is a node's networking identity request still undecided.
func (c *networkingApprover) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
			return nil
		}
	}
	node, err := agent.CheckNetworkingCSR(csr)
	if err != nil {
		return nil // not one of ours
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved",
		Message: fmt.Sprintf("Kube: the networking identity of node %s", node), LastUpdateTime: metav1.NewTime(time.Now()),
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	c.log.Info("networking identity approved", "csr", csr.Name, "node", node)
	return nil
}
