package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	upstream "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	quota "k8s.io/apiserver/pkg/quota/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"
	cpadmission "k8s.io/kubernetes/pkg/controlplane/apiserver/admission"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubeapiserver/admission/exclusion"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
	"k8s.io/kubernetes/plugin/pkg/admission/noderestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/nodetaint"
	"k8s.io/kubernetes/plugin/pkg/admission/podtopologylabels"
	podpriority "k8s.io/kubernetes/plugin/pkg/admission/priority"
	"k8s.io/kubernetes/plugin/pkg/admission/runtimeclass"
	"k8s.io/kubernetes/plugin/pkg/admission/security/podsecurity"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/persistentvolume/resize"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageclass/setdefault"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageobjectinuseprotection"

	"kubeos.dev/kube/internal/admission"
)

// KubernetesVersion is the version upstream's plugins are told they run in (PodSecurity's
// "latest" policy version follows it).
const KubernetesVersion = "1.37"

var (
	pods            = corev1.SchemeGroupVersion.WithResource("pods")
	nodes           = corev1.SchemeGroupVersion.WithResource("nodes")
	namespaces      = corev1.SchemeGroupVersion.WithResource("namespaces")
	serviceAccounts = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	limitRanges     = corev1.SchemeGroupVersion.WithResource("limitranges")
	resourceQuotas  = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	pvcs            = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pvs             = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	priorityClasses = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
	storageClasses  = storagev1.SchemeGroupVersion.WithResource("storageclasses")
	csiDrivers      = storagev1.SchemeGroupVersion.WithResource("csidrivers")
	runtimeClasses  = nodev1.SchemeGroupVersion.WithResource("runtimeclasses")
	resourceClaims  = resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
	deviceClasses   = resourcev1.SchemeGroupVersion.WithResource("deviceclasses")
)

// plugin is one of upstream's admission plugins, with the resources its informers list (it
// is left out while the server does not serve them: its informers would never sync).
type plugin struct {
	name     string
	register func(*upstream.Plugins)
	needs    func() []schema.GroupVersionResource
}

func needs(gvrs ...schema.GroupVersionResource) func() []schema.GroupVersionResource {
	return func() []schema.GroupVersionResource { return gvrs }
}

// Plugins are kube-apiserver's default admission plugins in its order (AllOrderedPlugins in
// k8s.io/kubernetes/pkg/kubeapiserver/options/plugins.go), ResourceQuota last: upstream runs
// it after the webhooks (see Quota).
var Plugins = []plugin{
	{lifecycle.PluginName, lifecycle.Register, needs(namespaces)},
	{limitranger.PluginName, limitranger.Register, needs(limitRanges)},
	{serviceaccount.PluginName, serviceaccount.Register, needs(serviceAccounts)},
	{noderestriction.PluginName, noderestriction.Register, func() []schema.GroupVersionResource {
		out := []schema.GroupVersionResource{pods, nodes, serviceAccounts}
		if utilfeature.DefaultFeatureGate.Enabled(features.ServiceAccountNodeAudienceRestriction) {
			out = append(out, csiDrivers, pvcs, pvs)
		}
		return out
	}},
	{nodetaint.PluginName, nodetaint.Register, needs()},
	{podsecurity.PluginName, podsecurity.Register, needs(namespaces, pods)},
	{podpriority.PluginName, podpriority.Register, needs(priorityClasses)},
	{defaulttolerationseconds.PluginName, defaulttolerationseconds.Register, needs()},
	{setdefault.PluginName, setdefault.Register, needs(storageClasses)},
	{storageobjectinuseprotection.PluginName, storageobjectinuseprotection.Register, needs()},
	{resize.PluginName, resize.Register, needs(storageClasses)},
	{runtimeclass.PluginName, runtimeclass.Register, needs(runtimeClasses)},
	{podtopologylabels.PluginName, podtopologylabels.Register, needs(nodes)},
	{resourcequota.PluginName, resourcequota.Register, needs(resourceQuotas)},
}

// Options configure the built-in plugins.
type Options struct {
	// Config is a loopback client configuration with the rights of the API server itself
	// (the plugins' informers and their writes, such as ResourceQuota's status updates).
	Config *rest.Config
	// Served says whether the server serves a resource; plugins whose informers need one it
	// does not serve are left out. Nil: every resource is served.
	Served func(schema.GroupVersionResource) bool
	// Disabled names plugins to leave out.
	Disabled []string
	// Log receives one line per left-out plugin.
	Log *slog.Logger
	// Pods, when set, is where the plugins read pods instead of an informer of their own.
	Pods PodSource
}

// Builtin runs upstream's plugins behind Kube's admission interface.
type Builtin struct {
	factory informers.SharedInformerFactory
	stop    chan struct{}
	// chain holds every enabled plugin but ResourceQuota, in order; quota holds
	// ResourceQuota (nil when left out).
	chain   upstream.Interface
	quota   upstream.Interface
	enabled []string
}

var (
	_ admission.Mutator   = (*Builtin)(nil)
	_ admission.Validator = (*Builtin)(nil)
)

// New builds the plugins on a loopback client; Start runs their informers. The plugins
// refuse nothing for want of data before Start, except NamespaceLifecycle, which waits for
// its namespace informer on creates of namespaced objects.
func New(o Options) (*Builtin, error) {
	if o.Config == nil {
		return nil, errors.New("builtin admission: no client configuration")
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	return newBuiltin(cs, o)
}

// newBuiltin builds the plugins on a client.
func newBuiltin(cs kubernetes.Interface, o Options) (*Builtin, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	served := o.Served
	if served == nil {
		served = func(schema.GroupVersionResource) bool { return true }
	}
	b := &Builtin{factory: informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(dropManagedFields)),
		stop: make(chan struct{})}
	factory := b.factory
	if o.Pods != nil {
		factory = withPods(factory, o.Pods)
	}
	// The quota evaluators count only resources the server serves.
	quotaConfig, err := quotaConfiguration(factory, served)
	if err != nil {
		return nil, err
	}
	inits := upstream.PluginInitializers{
		initializer.New(cs, nil, factory, &sarAuthorizer{client: cs}, utilfeature.DefaultFeatureGate,
			compatibility.NewEffectiveVersionFromString(KubernetesVersion, "", ""), b.stop, nil),
		cpadmission.NewPluginInitializer(quotaConfig, exclusion.Excluded()),
	}
	registry := upstream.NewPlugins()
	disabled := map[string]bool{}
	for _, n := range o.Disabled {
		disabled[n] = true
	}
	var chain []upstream.Interface
plugins:
	for _, p := range Plugins {
		if disabled[p.name] {
			continue
		}
		for _, gvr := range p.needs() {
			if !served(gvr) {
				o.Log.Info("admission plugin left out: its resources are not served", "plugin", p.name, "resource", gvr.String())
				continue plugins
			}
		}
		p.register(registry)
		plug, err := registry.InitPlugin(p.name, nil, inits)
		if err != nil {
			close(b.stop)
			return nil, err
		}
		b.enabled = append(b.enabled, p.name)
		if p.name == resourcequota.PluginName {
			b.quota = plug
			continue
		}
		chain = append(chain, plug)
	}
	b.chain = upstream.NewChainHandler(chain...)
	return b, nil
}

// dropManagedFields keeps the informers' copies smaller (every pod of the cluster, for
// NodeRestriction and PodSecurity): no plugin reads managedFields.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// quotaConfiguration is upstream's admission quota configuration (pods, services and
// claims by their own evaluators, every other resource by object count) over the served
// resources.
func quotaConfiguration(f informers.SharedInformerFactory, served func(schema.GroupVersionResource) bool) (quota.Configuration, error) {
	return quotainstall.NewQuotaConfigurationForAdmission(f, servedResources(func(gvr schema.GroupVersionResource) bool {
		if gvr == resourceClaims {
			// The claims' evaluator lists pods and device classes too.
			return served(gvr) && served(pods) && served(deviceClasses)
		}
		return served(gvr)
	}))
}

// servedResources is the server's resources as upstream's resource configuration.
type servedResources func(schema.GroupVersionResource) bool

func (s servedResources) ResourceEnabled(gvr schema.GroupVersionResource) bool { return s(gvr) }

func (s servedResources) AnyResourceForGroupEnabled(string) bool { return true }

func (s servedResources) ResourceExplicitlyEnabled(gvr schema.GroupVersionResource) bool {
	return s(gvr)
}

func (s servedResources) VersionExplicitlyEnabled(schema.GroupVersion) bool { return true }

// Enabled names the plugins that run, in order.
func (b *Builtin) Enabled() []string { return append([]string(nil), b.enabled...) }

// Start runs the plugins' informers until ctx ends and returns once they have synced (or
// fails after a minute). When ctx ends the plugins' workers stop.
func (b *Builtin) Start(ctx context.Context) error {
	b.factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		close(b.stop)
		b.factory.Shutdown()
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for t, ok := range b.factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return fmt.Errorf("builtin admission: informer for %v did not sync", t)
		}
	}
	return nil
}

// Admit runs the mutating plugins and writes their changes back into a.Object.
func (b *Builtin) Admit(ctx context.Context, a *admission.Attributes) error {
	return run(ctx, b.chain, a, true)
}

// Validate runs the validating plugins but ResourceQuota.
func (b *Builtin) Validate(ctx context.Context, a *admission.Attributes) error {
	return run(ctx, b.chain, a, false)
}

// Quota is ResourceQuota, a validating plugin that upstream runs last, after the
// validating webhooks (it admits everything when left out).
func (b *Builtin) Quota() admission.Validator {
	return quotaPlugin{b.quota}
}

type quotaPlugin struct{ p upstream.Interface }

func (q quotaPlugin) Validate(ctx context.Context, a *admission.Attributes) error {
	return run(ctx, q.p, a, false)
}

// run runs the plugins of h on a, its objects converted at most once.
func run(ctx context.Context, h upstream.Interface, a *admission.Attributes, mutating bool) error {
	if h == nil || !h.Handles(upstream.Operation(a.Operation)) {
		return nil
	}
	c, err := convert(ctx, a, mutating)
	if err != nil {
		return err
	}
	ctx = withWarnings(ctx)
	if mutating {
		m, ok := h.(upstream.MutationInterface)
		if !ok {
			return nil
		}
		err = m.Admit(ctx, c, objectInterfaces)
	} else if v, ok := h.(upstream.ValidationInterface); ok {
		err = v.Validate(ctx, c, objectInterfaces)
	}
	if cerr := c.conversionErr(); cerr != nil {
		return cerr
	}
	if err != nil || !mutating {
		return err
	}
	return c.writeBack(a)
}
