package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// dumpOnFailure logs, when t has failed, the state a flaky failure needs to be explained
// by: the namespace's Deployments, ReplicaSets, pods and platform objects, each with its
// resourceVersion, generation, spec.replicas where it has one, and status; then the last
// 200 lines of the server's log.
func dumpOnFailure(t *testing.T, c client.Client, namespace string, log *servertest.Buffer) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b strings.Builder
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.ReplicaSetList{}, &corev1.PodList{},
			&v1alpha1.ComponentList{}, &v1alpha1.ApplicationList{}, &v1alpha1.ReleaseList{}, &v1alpha1.RouteList{}, &v1alpha1.DatabaseList{}} {
			if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
				fmt.Fprintf(&b, "list %T: %v\n", list, err)
				continue
			}
			raw, _ := json.Marshal(list)
			var items struct {
				Items []struct {
					Metadata struct {
						Name              string `json:"name"`
						ResourceVersion   string `json:"resourceVersion"`
						Generation        int64  `json:"generation"`
						DeletionTimestamp string `json:"deletionTimestamp,omitempty"`
						Finalizers        []string
					} `json:"metadata"`
					Spec struct {
						Replicas *int32 `json:"replicas,omitempty"`
						NodeName string `json:"nodeName,omitempty"`
					} `json:"spec"`
					Status json.RawMessage `json:"status"`
				} `json:"items"`
			}
			_ = json.Unmarshal(raw, &items)
			for _, it := range items.Items {
				replicas := ""
				if it.Spec.Replicas != nil {
					replicas = fmt.Sprintf(" replicas=%d", *it.Spec.Replicas)
				}
				fmt.Fprintf(&b, "%T %s rv=%s gen=%d%s node=%s deleting=%q finalizers=%v\n  status %s\n", list, it.Metadata.Name,
					it.Metadata.ResourceVersion, it.Metadata.Generation, replicas, it.Spec.NodeName, it.Metadata.DeletionTimestamp,
					it.Metadata.Finalizers, it.Status)
			}
		}
		t.Logf("state of namespace %s at the failure:\n%s\nserver log (last 200 lines):\n%s", namespace, b.String(), tail(log.String(), 200))
	})
}
