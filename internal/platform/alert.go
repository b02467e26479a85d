package platform

import "kubeos.dev/kube/pkg/lifecycle"

// registerAlert registers the Alert kind (PromQL alerting rules).
func registerAlert(e *lifecycle.Engine, o Options) error { return nil }
