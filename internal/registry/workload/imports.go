package workload

import (
	_ "k8s.io/kubernetes/pkg/api/legacyscheme" // upstream's scheme, until the kinds use it
)
