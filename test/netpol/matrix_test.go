package netpol

import (
	"sync"
	"testing"

	"kubeos.dev/kube/test/netharness"
	"kubeos.dev/kube/test/netpol/matrix"
)

var (
	modelOnce sync.Once
	theModel  *matrix.Model
	modelErr  error
)

// setup makes namespaces x, y, z and the nine pods (all on the one node) once for the package.
func setup(t *testing.T) *matrix.Model {
	t.Helper()
	modelOnce.Do(func() {
		theModel, modelErr = matrix.New(t, cluster, func(string) netharness.Node { return cluster.A })
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
