package pods

// Labels the agent puts on sandboxes and containers (the kubelet's names), so that the
// runtime alone says which pod and container each belongs to.
const (
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodUID       = "io.kubernetes.pod.uid"
	labelContainer    = "io.kubernetes.container.name"
	labelInit         = "kube.agent/init"
	annotationGrace   = "io.kubernetes.pod.terminationGracePeriod"
)
