package platform

import "kubeos.dev/kube/pkg/lifecycle"

// registerDatabase registers the Database kind (PostgreSQL databases and roles).
func registerDatabase(e *lifecycle.Engine, o Options) error { return nil }
