// Package platform is Kube's built-in platform kinds on the lifecycle engine: their drivers
// (Tenant, Quota, AccessPolicy, SecretPolicy, Credential, Certificate), the admission
// plugin that refuses dependency cycles, objects past a Quota and Secret references no
// SecretPolicy allows, and the authorizer that enforces AccessPolicies on every request
// into a tenant's namespaces.
//
// Register adds the kinds to an engine; the server runs the engine under leader election and
// keeps Admission and Authorizer fed from an informer cache on every server.
package platform
