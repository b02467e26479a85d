package server

import (
	"context"
	"errors"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	flowcontrolbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/informers"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/ensurer"

	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"kubeos.dev/kube/internal/rbac"
)

// startFlowControlConfiguration keeps API priority and fairness's bootstrap configuration
// (flowcontrol.apiserver.k8s.io/v1) as every kube-apiserver does after it starts: the
// mandatory FlowSchemas and PriorityLevelConfigurations (exempt, catch-all) are always
// restored to upstream's spec, the suggested ones (system, leader-election, workload-high,
// global-default, …) are created when missing and kept unless a user took them over
// (annotation apf.kubernetes.io/autoupdate-spec: "false"), and bootstrap objects upstream no
// longer ships are removed. It runs every minute on every server, with upstream's ensurer.
// It also runs API priority and fairness's controller when it is on.
func (s *Server) startFlowControlConfiguration(ctx context.Context, wg *sync.WaitGroup) error {
	cs := s.apiserverClient
	if s.flowControl != nil {
		s.flowControlInformers.Start(ctx.Done())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.flowControlInformers.Shutdown()
			if err := s.flowControl.Run(ctx.Done()); err != nil && ctx.Err() == nil {
				s.opts.Log.Error("API priority and fairness stopped", "err", err)
			}
		}()
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	fc := f.Flowcontrol().V1()
	fsLister, plcLister := fc.FlowSchemas().Lister(), fc.PriorityLevelConfigurations().Lister()
	synced := []cache.InformerSynced{fc.FlowSchemas().Informer().HasSynced, fc.PriorityLevelConfigurations().Informer().HasSynced}
	log := s.opts.Log.With("component", "flowcontrol-bootstrap")
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.Start(ctx.Done())
		defer f.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		client := cs.FlowcontrolV1()
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			// Retry each second until one pass succeeds, then once a minute.
			_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				if err := ensureFlowControl(ctx, client, fsLister, plcLister); err != nil {
					if ctx.Err() == nil {
						log.Warn("API priority and fairness bootstrap configuration, will retry", "err", err)
					}
					return false, nil
				}
				return true, nil
			})
		}, time.Minute)
	}()
	return nil
}

// kubeFlowSchemas are Kube's own suggested FlowSchemas beside upstream's: kube-controllers
// puts the in-process controllers (group system:kube-controllers, whose users upstream's
// schemas do not know) in workload-high, where upstream's kube-controller-manager schema
// puts kube-controller-manager, instead of the small global-default level. They are kept as
// upstream's suggested ones are.
var kubeFlowSchemas = []*flowcontrolv1.FlowSchema{{
	ObjectMeta: metav1.ObjectMeta{Name: "kube-controllers", Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
	Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-high"},
		MatchingPrecedence:         800,
		DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: rbac.ControllersGroup}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll},
				Resources: []string{flowcontrolv1.ResourceAll}, ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery}}},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll}}},
		}},
	},
}}

func ensureFlowControl(ctx context.Context, c flowcontrolclient.FlowcontrolV1Interface, fsLister flowcontrollisters.FlowSchemaLister, plcLister flowcontrollisters.PriorityLevelConfigurationLister) error {
	plcOps := ensurer.NewPriorityLevelConfigurationOps(c.PriorityLevelConfigurations(), plcLister)
	fsOps := ensurer.NewFlowSchemaOps(c.FlowSchemas(), fsLister)
	suggested := append(append([]*flowcontrolv1.FlowSchema{}, flowcontrolbootstrap.SuggestedFlowSchemas...), kubeFlowSchemas...)
	// Suggested first, then mandatory, then the removal of dangling bootstrap objects, as
	// upstream orders them.
	return errors.Join(
		ensurer.EnsureConfigurations(ctx, plcOps, flowcontrolbootstrap.SuggestedPriorityLevelConfigurations, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()),
		ensurer.EnsureConfigurations(ctx, fsOps, suggested, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.FlowSchema]()),
		ensurer.EnsureConfigurations(ctx, plcOps, flowcontrolbootstrap.MandatoryPriorityLevelConfigurations, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()),
		ensurer.EnsureConfigurations(ctx, fsOps, flowcontrolbootstrap.MandatoryFlowSchemas, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.FlowSchema]()),
		ensurer.RemoveUnwantedObjects(ctx, fsOps, append(append([]*flowcontrolv1.FlowSchema{}, flowcontrolbootstrap.MandatoryFlowSchemas...), suggested...)),
		ensurer.RemoveUnwantedObjects(ctx, plcOps, append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, flowcontrolbootstrap.MandatoryPriorityLevelConfigurations...), flowcontrolbootstrap.SuggestedPriorityLevelConfigurations...)),
	)
}

// newFlowControl builds API priority and fairness (upstream's controller, fed by informers
// on the server's own loopback client, started by startFlowControlConfiguration): the
// server's concurrency is --max-requests-inflight plus --max-mutating-requests-inflight, as
// upstream divides it among the priority levels. Until its informers sync it classifies
// with upstream's mandatory configuration (exempt, catch-all).
func (s *Server) newFlowControl() {
	o := s.opts
	if o.DisablePriorityAndFairness {
		return
	}
	s.flowControlInformers = informers.NewSharedInformerFactory(s.apiserverClient, 0)
	s.flowControl = utilflowcontrol.New(s.flowControlInformers, s.apiserverClient.FlowcontrolV1(), o.MaxRequestsInFlight+o.MaxMutatingRequestsInFlight)
}
