// Package sharedinformers shares one client-go informer factory among the built-in
// controllers that lead on this server, as kube-controller-manager's
// ControllerContext.InformerFactory does: pods, nodes, ReplicaSets … are listed and
// watched once per server instead of once per controller.
//
// Kube runs each controller under its own Lease, so controllers start and stop leading
// at different times; a Hub therefore hands each controller's leadership term a view of
// the shared factory:
//
//	f := sharedinformers.For(ctx, client) // the server's Hub, or a factory of its own
//	ctrl := upstream.NewController(ctx, f.Core().V1().Pods(), …, client)
//	f.Start(ctx.Done())
//	defer f.Shutdown() // removes this term's event handlers, releases the informers
//	ctrl.Run(ctx, workers)
//
// A view is an informers.SharedInformerFactory. Its informers are the hub's, started by
// the hub and kept running while any controller leads. The event handlers a controller
// adds through a view reach the informers only at the view's Start (an upstream
// constructor adds handlers before it has finished building its controller, and an
// informer another controller started would call them at once), and are removed when
// the view shuts down, so a controller that loses
// its Lease leaves nothing behind on informers other controllers still use. When the
// last view shuts down the informers stop and their caches go; the next term starts
// afresh. Indexers a controller adds again in a later term (same name) are kept, not
// refused.
//
// Beside the sharing, the package narrows two scans upstream's controllers make per
// event through their listers and handlers: LabelIndexedPods and LabelIndexedEndpointSlices
// (a Service's or a budget's pods by one label of its selector instead of every pod of the
// namespace) and SelectorMappedPods (a pod's Services by an index of their selectors
// instead of matching every Service of the namespace). Both give upstream's answers.
//
// The hub's informers list and watch with the hub's client (the server gives it an
// identity of its own); each controller keeps its own client, and so its own identity,
// for its writes.
package sharedinformers
