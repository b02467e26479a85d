// Package recorder gives a built-in controller an events.k8s.io/v1 event recorder (client-go
// tools/events with the events/v1 sink), reporting as "kubeos.dev/<controller>".
//
// Isomorphic events (same regarding object, reason, action and type) are folded by the
// broadcaster into one Event with a series count, so a controller may record one per action
// without flooding the API.
package recorder

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
)

// Recorder records events until Stop.
type Recorder struct {
	events.EventRecorder
	broadcaster events.EventBroadcaster
}

// Start creates a recorder for controller that writes through cfg until ctx ends or Stop.
func Start(ctx context.Context, cfg *rest.Config, controller string) (*Recorder, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, err
	}
	return &Recorder{EventRecorder: b.NewRecorder(scheme.Scheme, "kubeos.dev/"+controller), broadcaster: b}, nil
}

// Stop stops recording; events not yet written are dropped.
func (r *Recorder) Stop() { r.broadcaster.Shutdown() }
