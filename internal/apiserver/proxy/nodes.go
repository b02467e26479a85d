package proxy

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the core types and their query-parameter conversions in legacyscheme
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/client"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
)

// nodeConnections is upstream's NodeConnectionInfoGetter over Objects and one transport
// built from a *tls.Config (upstream's reads certificate files).
type nodeConnections struct {
	objects   Objects
	port      int
	types     []corev1.NodeAddressType
	transport http.RoundTripper
}

var _ client.ConnectionInfoGetter = (*nodeConnections)(nil)

// GetConnectionInfo implements client.ConnectionInfoGetter: the node's preferred address,
// its agent port (or the default) and the agent transport.
func (n *nodeConnections) GetConnectionInfo(ctx context.Context, nodeName types.NodeName) (*client.ConnectionInfo, error) {
	node, err := n.objects.Node(ctx, string(nodeName))
	if err != nil {
		return nil, err
	}
	return connectionInfo(node, n.types, n.port, n.transport)
}

// connectionInfo is where the agent of node listens, as upstream decides it.
func connectionInfo(node *corev1.Node, preferred []corev1.NodeAddressType, defaultPort int, transport http.RoundTripper) (*client.ConnectionInfo, error) {
	host, err := nodeutil.GetPreferredNodeAddress(node, preferred)
	if err != nil {
		return nil, err
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultPort
	}
	return &client.ConnectionInfo{
		Scheme:    "https",
		Hostname:  host,
		Port:      strconv.Itoa(port),
		Transport: transport,
		// Kube never skips verifying an agent: the insecure transport upstream offers for
		// pods/log?insecureSkipTLSVerifyBackend=true is the verified one here.
		InsecureSkipTLSVerifyTransport: transport,
		NodeFeatures:                   node.Status.DeclaredFeatures,
	}, nil
}

// agentSpeaksWebSockets reports whether upstream would hand a WebSocket request to the
// node's agent as it is rather than translate it to SPDY: the agent declares
// ExtendWebSocketsToKubelet and the gate is on (beta, on by default in 1.36).
func agentSpeaksWebSockets(info *client.ConnectionInfo) bool {
	return featureEnabled(features.ExtendWebSocketsToKubelet) && slices.Contains(info.NodeFeatures, string(features.ExtendWebSocketsToKubelet))
}

// podGetter is upstream's pod.ResourceGetter over Objects: the pods of one namespace, in
// the internal type upstream's location functions take.
type podGetter struct {
	objects   Objects
	namespace string
}

// Get returns the internal pod name.
func (g podGetter) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	pod, err := g.objects.Pod(ctx, g.namespace, name)
	if err != nil {
		return nil, err
	}
	return internalPod(pod)
}

func internalPod(pod *corev1.Pod) (*api.Pod, error) {
	out := &api.Pod{}
	if err := legacyscheme.Scheme.Convert(pod, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
