package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kubeos.dev/kube/internal/admission"
	"kubeos.dev/kube/internal/admission/builtin"
	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/audit"
	"kubeos.dev/kube/internal/encryption"
	"kubeos.dev/kube/internal/storage"
	platformv1alpha1 "kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// AdmissionAuditOptions configure admission webhooks, the audit log and encryption at rest.
type AdmissionAuditOptions struct {
	// AuditPolicyFile is an audit.k8s.io/v1 Policy; empty disables auditing.
	AuditPolicyFile string
	// AuditLogPath is where audit events go as JSON lines ("-": standard output).
	AuditLogPath string
	// AuditLogMaxSize (MB) rotates the log; AuditLogMaxBackup rotated files are kept;
	// AuditLogMaxAge (days) removes older ones.
	AuditLogMaxSize, AuditLogMaxBackup, AuditLogMaxAge int
	// EncryptionProviderConfig is an apiserver.config.k8s.io/v1 EncryptionConfiguration;
	// empty stores values in plain JSON.
	EncryptionProviderConfig string
	// AdmissionClientCertFile and AdmissionClientKeyFile are the client certificate Kube
	// presents to admission webhooks (mutual TLS).
	AdmissionClientCertFile, AdmissionClientKeyFile string
}

func (o *AdmissionAuditOptions) validate() error {
	if o.AuditPolicyFile != "" && o.AuditLogPath == "" {
		return errors.New("--audit-policy-file needs --audit-log-path")
	}
	if o.AuditLogMaxSize < 0 || o.AuditLogMaxBackup < 0 || o.AuditLogMaxAge < 0 {
		return errors.New("--audit-log-maxsize, --audit-log-maxbackup and --audit-log-maxage must not be negative")
	}
	if (o.AdmissionClientCertFile == "") != (o.AdmissionClientKeyFile == "") {
		return errors.New("--admission-client-cert and --admission-client-key go together")
	}
	return nil
}

// newStore opens the object store, with the encryption transformer when configured.
func (s *Server) newStore() (*storage.Store, error) {
	if s.opts.EncryptionProviderConfig == "" {
		return storage.New(s.client), nil
	}
	t, err := encryption.LoadFile(s.opts.EncryptionProviderConfig)
	if err != nil {
		return nil, fmt.Errorf("--encryption-provider-config: %w", err)
	}
	return storage.NewWithTransformer(s.client, t), nil
}

// security is the admission chain and the audit log of a running server.
type security struct {
	admission *admission.Chain
	audit     *audit.Log
	source    *admission.InformerSource
	// builtin is kube-apiserver's default admission plugins (internal/admission/builtin).
	builtin *builtin.Builtin
}

// newSecurity builds the admission chain (the built-in plugins, then mutating webhooks;
// the built-in plugins, validating admission policies, validating webhooks, then
// ResourceQuota) and the audit log. The REST handler checks NamespaceLifecycle once more
// before it stores, from its watch cache and etcd.
func (s *Server) newSecurity() (*security, error) {
	o := s.opts
	sec := &security{}
	if o.AuditPolicyFile != "" {
		p, err := audit.LoadPolicyFile(o.AuditPolicyFile)
		if err != nil {
			return nil, fmt.Errorf("--audit-policy-file: %w", err)
		}
		if sec.audit, err = audit.NewLog(p, audit.LogOptions{Path: o.AuditLogPath, MaxSizeMB: o.AuditLogMaxSize, MaxBackups: o.AuditLogMaxBackup, MaxAgeDays: o.AuditLogMaxAge}); err != nil {
			return nil, err
		}
		sec.audit.Annotate = annotateLifecycle
	}
	var cert *tls.Certificate
	if o.AdmissionClientCertFile != "" {
		c, err := tls.LoadX509KeyPair(o.AdmissionClientCertFile, o.AdmissionClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--admission-client-cert/--admission-client-key: %w", err)
		}
		cert = &c
	}
	cfg, err := s.LoopbackConfig("system:kube-admission", "system:masters")
	if err != nil {
		return nil, err
	}
	if sec.source, err = admission.NewInformerSource(cfg); err != nil {
		return nil, err
	}
	webhooks := admission.NewWebhooks(admission.WebhookOptions{Source: sec.source, ClientCert: cert, ResolveService: s.aggregator.ResolveService})
	policies, err := admission.NewPolicies(admission.PolicyOptions{Source: sec.source, Params: paramGetter{s}})
	if err != nil {
		return nil, err
	}
	mutatingPolicies := admission.NewMutatingPolicies(admission.PolicyOptions{Source: sec.source, Params: paramGetter{s}})
	// Built-in plugins first, as kube-apiserver orders them; ResourceQuota last, after the
	// validating webhooks (internal/admission/builtin).
	served := func(gvr schema.GroupVersionResource) bool { _, ok := s.Registry.Lookup(gvr); return ok }
	if sec.builtin, err = builtin.New(builtin.Options{Config: cfg, Served: served, Pods: cachePods{s}, Log: s.opts.Log.With("component", "admission")}); err != nil {
		return nil, err
	}
	sec.admission = &admission.Chain{
		Mutating:   []admission.Mutator{sec.builtin, mutatingPolicies, webhooks},
		Validating: []admission.Validator{sec.builtin, policies, webhooks, sec.builtin.Quota()},
	}
	return sec, nil
}

// start runs the admission informers (the API must be serving) until ctx ends.
func (sec *security) start(ctx context.Context) error {
	if err := sec.builtin.Start(ctx); err != nil {
		return err
	}
	return sec.source.Start(ctx)
}

func (sec *security) close() {
	if sec != nil && sec.audit != nil {
		sec.audit.Close()
	}
}

// paramGetter reads policy parameter objects from the store.
type paramGetter struct{ s *Server }

func (p paramGetter) GetParam(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	for _, k := range p.s.Registry.Kinds() {
		if k.Group != gv.Group || k.Version != gv.Version || k.Kind != kind {
			continue
		}
		if !k.Namespaced {
			namespace = ""
		}
		obj, err := p.s.Store.Get(ctx, k.Key(namespace, name))
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return obj.Object, nil
	}
	return nil, fmt.Errorf("paramKind %s %s is not served", apiVersion, kind)
}

// Audit annotations on requests about the lifecycle engine's kinds.
const (
	AuditOperatorAnnotation = "lifecycle.kubeos.dev/operator"
	AuditPhaseAnnotation    = "lifecycle.kubeos.dev/phase"
)

// annotateLifecycle adds to the audit events of requests about objects of the lifecycle
// engine's kinds (group kubeos.dev) the acting operator (the user the request acts as: the
// engine's own identity for its writes) and the object's lifecycle phase as the request
// left it.
func annotateLifecycle(ctx context.Context, ev *auditv1.Event) {
	if ev.ObjectRef == nil || ev.ObjectRef.APIGroup != platformv1alpha1.Group {
		return
	}
	if ev.Annotations == nil {
		ev.Annotations = map[string]string{}
	}
	operator := ev.User.Username
	if ev.ImpersonatedUser != nil {
		operator = ev.ImpersonatedUser.Username
	}
	ev.Annotations[AuditOperatorAnnotation] = operator
	if phase := request.AuditFrom(ctx).Phase(); phase != "" {
		ev.Annotations[AuditPhaseAnnotation] = phase
	}
}
