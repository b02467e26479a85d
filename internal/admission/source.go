package admission

import (
	"context"
	"fmt"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Source is what the dynamic admission plugins read: the webhook configurations, the
// validating admission policies and their bindings, and namespaces (for namespaceSelector).
// Lists come back sorted by name, as upstream orders webhooks.
type Source interface {
	MutatingWebhookConfigurations() []*admissionregistrationv1.MutatingWebhookConfiguration
	ValidatingWebhookConfigurations() []*admissionregistrationv1.ValidatingWebhookConfiguration
	ValidatingAdmissionPolicies() []*admissionregistrationv1.ValidatingAdmissionPolicy
	ValidatingAdmissionPolicyBindings() []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	MutatingAdmissionPolicies() []*admissionregistrationv1.MutatingAdmissionPolicy
	MutatingAdmissionPolicyBindings() []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Namespace returns a namespace by name (nil when it does not exist).
	Namespace(ctx context.Context, name string) *corev1.Namespace
}

// InformerSource is a Source fed by client-go informers over the loopback client, as
// kube-apiserver's admission plugins are: configuration changes take effect within moments,
// not synchronously with their write.
type InformerSource struct {
	client                  kubernetes.Interface
	factory                 informers.SharedInformerFactory
	mwc, vwc, vap, vapb, ns cache.SharedIndexInformer
	map_, mapb              cache.SharedIndexInformer
}

var _ Source = (*InformerSource)(nil)

// NewInformerSource prepares the informers; Start runs them.
func NewInformerSource(cfg *rest.Config) (*InformerSource, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	ar := f.Admissionregistration().V1()
	return &InformerSource{
		client:  cs,
		factory: f,
		mwc:     ar.MutatingWebhookConfigurations().Informer(),
		vwc:     ar.ValidatingWebhookConfigurations().Informer(),
		vap:     ar.ValidatingAdmissionPolicies().Informer(),
		vapb:    ar.ValidatingAdmissionPolicyBindings().Informer(),
		map_:    ar.MutatingAdmissionPolicies().Informer(),
		mapb:    ar.MutatingAdmissionPolicyBindings().Informer(),
		ns:      f.Core().V1().Namespaces().Informer(),
	}, nil
}

// Start runs the informers until ctx ends; it returns once they have synced (or fails after
// a minute).
func (s *InformerSource) Start(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for t, ok := range s.factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return fmt.Errorf("admission: informer for %v did not sync", t)
		}
	}
	go func() { <-ctx.Done(); s.factory.Shutdown() }()
	return nil
}

func sorted[T interface{ GetName() string }](objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// MutatingWebhookConfigurations implements Source.
func (s *InformerSource) MutatingWebhookConfigurations() []*admissionregistrationv1.MutatingWebhookConfiguration {
	return sorted[*admissionregistrationv1.MutatingWebhookConfiguration](s.mwc.GetStore().List())
}

// ValidatingWebhookConfigurations implements Source.
func (s *InformerSource) ValidatingWebhookConfigurations() []*admissionregistrationv1.ValidatingWebhookConfiguration {
	return sorted[*admissionregistrationv1.ValidatingWebhookConfiguration](s.vwc.GetStore().List())
}

// ValidatingAdmissionPolicies implements Source.
func (s *InformerSource) ValidatingAdmissionPolicies() []*admissionregistrationv1.ValidatingAdmissionPolicy {
	return sorted[*admissionregistrationv1.ValidatingAdmissionPolicy](s.vap.GetStore().List())
}

// ValidatingAdmissionPolicyBindings implements Source.
func (s *InformerSource) ValidatingAdmissionPolicyBindings() []*admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return sorted[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](s.vapb.GetStore().List())
}

// MutatingAdmissionPolicies implements Source.
func (s *InformerSource) MutatingAdmissionPolicies() []*admissionregistrationv1.MutatingAdmissionPolicy {
	return sorted[*admissionregistrationv1.MutatingAdmissionPolicy](s.map_.GetStore().List())
}

// MutatingAdmissionPolicyBindings implements Source.
func (s *InformerSource) MutatingAdmissionPolicyBindings() []*admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return sorted[*admissionregistrationv1.MutatingAdmissionPolicyBinding](s.mapb.GetStore().List())
}

// Namespace implements Source. A namespace created a moment ago may not have reached the
// informer yet: a miss is asked of the API.
func (s *InformerSource) Namespace(ctx context.Context, name string) *corev1.Namespace {
	if o, ok, err := s.ns.GetStore().GetByKey(name); err == nil && ok {
		ns, _ := o.(*corev1.Namespace)
		return ns
	}
	ns, err := s.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return ns
}
