package platform

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Events lets drivers record Kubernetes Events (drift repaired) through the recorder the
// engine's controllers use, once they run (Set); before that events are dropped.
type Events struct {
	r atomic.Pointer[lifecycle.EventRecorder]
}

// Set supplies the recorder.
func (e *Events) Set(r lifecycle.EventRecorder) { e.r.Store(&r) }

// Warning records a Warning event on obj (nothing when e or its recorder is nil).
func (e *Events) Warning(obj runtime.Object, reason, action, msg string) {
	if e == nil {
		return
	}
	if p := e.r.Load(); p != nil && *p != nil {
		(*p).Eventf(obj, nil, corev1.EventTypeWarning, reason, action, "%s", msg)
	}
}
