package platform

import "kubeos.dev/kube/pkg/lifecycle"

// registerBucket registers the Bucket kind (S3 buckets).
func registerBucket(e *lifecycle.Engine, o Options) error { return nil }
