// Package leader runs a group of controllers only while this process holds a
// coordination.k8s.io Lease in kube-system (client-go leader election), so that several
// `kube server` processes on one etcd cluster run each controller group exactly once.
//
// Usage, from the server or any built-in controller:
//
//	err := leader.Run(ctx, cfg, "kube-garbage-collector", identity, func(ctx context.Context) {
//		_ = gc.Start(ctx) // blocks until ctx ends: shutdown, or the Lease was lost
//	})
//
// Run campaigns for the Lease; while it holds it, start runs with a context that ends when
// the Lease is lost or Run's context ends. After start returns, the Lease is released (on
// shutdown) so another server takes over at once; after a loss Run campaigns again. A
// crashed leader's Lease is taken over once it expires (Options.LeaseDuration, 10 s by
// default).
package leader
