// Package workload defines the kinds that run software — Pods, Nodes, Services, the apps,
// batch, autoscaling, policy, discovery, networking, storage, scheduling, node, resource and
// certificates kinds — as registry Kinds built from upstream's own code: each kind's
// validation, defaulting, PrepareForCreate/Update and status strategies come from
// k8s.io/kubernetes pkg/registry, its conversions and defaults from pkg/apis/*/install
// (legacyscheme), its Table rows from pkg/printers/internalversion. Nothing here retypes an
// upstream rule; the package adapts upstream's internal-type strategies to the registry's
// unstructured objects.
package workload
