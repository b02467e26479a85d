// Package apiservice keeps the local APIServices (apiregistration.k8s.io/v1), as
// kube-aggregator's autoregister and crdregistration controllers do in kube-apiserver: one
// APIService per group-version Kube serves — "v1." for the core group, "<version>.<group>"
// otherwise — with no service (served locally), the group and version priorities discovery
// orders them by, the label kube-aggregator.kubernetes.io/automanaged ("onstart" for the
// built-in groups, "true" for those of CustomResourceDefinitions) and the condition
// Available=True, reason Local. An automanaged APIService whose group-version is no longer
// served (its CRD was deleted) is deleted; APIServices a user made are left alone (those
// naming a service are internal/apiserver/aggregator's, which proxies to them and checks
// their availability).
//
// The decision (the desired APIServices from the served groups and the CRDs, and the plan
// of creates, updates and deletes against what exists) is pure, in reconcile.go; the
// controller (controller.go) reads discovery and the CRDs, applies the plan, and runs again
// when a CRD changes and every 30 s.
package apiservice
