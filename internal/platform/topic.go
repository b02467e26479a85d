package platform

import "kubeos.dev/kube/pkg/lifecycle"

// registerTopic registers the Topic kind (NATS JetStream streams).
func registerTopic(e *lifecycle.Engine, o Options) error { return nil }
