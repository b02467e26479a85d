// Package builtin runs kube-apiserver's default admission plugins — upstream's own code from
// k8s.io/kubernetes/plugin/pkg/admission, k8s.io/apiserver and k8s.io/pod-security-admission
// — behind Kube's admission interface, in upstream's order: NamespaceLifecycle, LimitRanger,
// ServiceAccount, NodeRestriction, TaintNodesByCondition, PodSecurity, Priority,
// DefaultTolerationSeconds, DefaultStorageClass, StorageObjectInUseProtection,
// PersistentVolumeClaimResize, RuntimeClass, then (after the webhooks, see Builtin.Quota)
// ResourceQuota.
//
// One adapter carries a request across: Kube's Attributes (unstructured objects) become
// upstream's admission.Attributes whose objects are upstream's internal types
// (unstructured → v1 type with v1 defaults → internal, through legacyscheme.Scheme); kinds
// upstream does not know (custom resources) stay unstructured, as upstream passes them. A
// mutating plugin's changes are written back (internal → v1 → unstructured, replacing
// a.Object's content); an object no plugin changed is left untouched. The plugins' errors
// are upstream's API errors (403 with upstream's messages) and pass through unchanged; their
// warnings become Warning headers and their audit annotations join the request's audit
// event.
//
// The plugins read the cluster through client-go informers on a loopback client, as in
// kube-apiserver (initialized by upstream's plugin initializers); Builtin.Start runs them.
// A plugin whose informers need a resource the server does not serve is left out.
//
// Usage:
//
//	b, err := builtin.New(builtin.Options{Config: loopback, Served: served})
//	chain := &admission.Chain{
//		Mutating:   []admission.Mutator{b, webhooks},
//		Validating: []admission.Validator{b, policies, webhooks, b.Quota()},
//	}
//	err = b.Start(ctx) // once the API serves
package builtin
