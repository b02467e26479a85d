package platform

import "kubeos.dev/kube/pkg/lifecycle"

// registerCache registers the Cache kind (Redis ACL users).
func registerCache(e *lifecycle.Engine, o Options) error { return nil }
