package netpol

import (
	"sync"
	"testing"

	"kubeos.dev/kube/internal/agent/netpol/netpoltest"
	"kubeos.dev/kube/test/netharness"
	"kubeos.dev/kube/test/netpol/matrix"
)

var (
	modelOnce sync.Once
	theModel  *matrix.Model
	modelErr  error
)

// setup makes namespaces x, y, z and the nine pods once for the package, alternating the
// nodes A, B, A, … in x/a … z/c order.
func setup(t *testing.T) *matrix.Model {
	t.Helper()
	modelOnce.Do(func() {
		index := map[string]int{}
		for i, p := range netpoltest.AllPods() {
			index[p] = i
		}
		theModel, modelErr = matrix.New(t, cluster, func(pod string) netharness.Node {
			if index[pod]%2 == 0 {
				return cluster.A
			}
			return cluster.B
		})
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return theModel
}

// TestUpstreamMatrix runs upstream's e2e cases in order over the same nine pods: after
// each step's policies and labels land, the probed matrix must become the expected one.
func TestUpstreamMatrix(t *testing.T) {
	setup(t).Run(t, cluster.Logf)
}
