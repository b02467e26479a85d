// Package v1alpha1 is the kubeos.dev/v1alpha1 API of Kube's built-in platform kinds —
// Tenant, Quota, AccessPolicy, SecretPolicy, Credential and Certificate — as typed Go
// objects (deepcopy in zz_deepcopy.go), their scheme and their CustomResourceDefinitions
// (CRDs), which kube server installs at start.
package v1alpha1
