package localpath

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/client-go/kubernetes"
)

// Agents reach the node agents' volume API (internal/agent/server: /volumes/{pv}).
type Agents interface {
	// Create makes pv's directory on node and returns its path.
	Create(ctx context.Context, node, pv string) (string, error)
	// Remove removes pv's directory on node (done when it is absent).
	Remove(ctx context.Context, node, pv string) error
}

// proxyAgents reach the agents through the API server's nodes/<node>/proxy subresource, as
// the API server reaches them for logs: the caller needs nodes/proxy create and delete.
type proxyAgents struct{ client kubernetes.Interface }

var _ Agents = proxyAgents{}

func (a proxyAgents) Create(ctx context.Context, node, pv string) (string, error) {
	raw, err := a.client.CoreV1().RESTClient().Post().AbsPath("/api/v1/nodes", node, "proxy", "volumes", pv).Do(ctx).Raw()
	if err != nil {
		return "", fmt.Errorf("node %s: create the directory of %s: %w", node, pv, err)
	}
	var out struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Path == "" {
		return "", fmt.Errorf("node %s: create the directory of %s: bad answer %q", node, pv, raw)
	}
	return out.Path, nil
}

func (a proxyAgents) Remove(ctx context.Context, node, pv string) error {
	if err := a.client.CoreV1().RESTClient().Delete().AbsPath("/api/v1/nodes", node, "proxy", "volumes", pv).Do(ctx).Error(); err != nil {
		return fmt.Errorf("node %s: remove the directory of %s: %w", node, pv, err)
	}
	return nil
}
