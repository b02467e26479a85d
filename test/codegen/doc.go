// Package codegen tests the generated typed clients of kubeos.dev/v1alpha1 (pkg/client):
// that they are up to date with pkg/apis (hack/update-codegen.sh --verify, so `go test` in CI
// fails on stale generated code), and that the clientset, the apply configurations, the
// informers and the listers work against a real in-process kube server whose lifecycle engine
// drives the objects.
package codegen
