// Package storagetest is the conformance suite of Kube's object store: the behaviour the API
// server and the watch cache rely on, checked against a real backend.
//
// A backend's test calls Run with a constructor; every test writes under its own key prefix,
// so all of them can share one etcd member:
//
//	func TestStore(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storagetest.Store { return storage.New(client) })
//	}
//
// The suite runs its tests one after another (never in parallel): some compact the cluster's
// history, which is global, and a test only relies on revisions it wrote itself after that.
package storagetest
