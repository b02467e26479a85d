package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	apicore "k8s.io/kubernetes/pkg/apis/core"
	corev1conv "k8s.io/kubernetes/pkg/apis/core/v1"
	eventsv1conv "k8s.io/kubernetes/pkg/apis/events/v1"
)

// Events of both APIs live in one place, as in kube-apiserver: events.k8s.io/v1 Events are
// stored as core/v1 Events (under the core group's events prefix) and converted on the way
// in and out with upstream's own conversions (regarding ↔ involvedObject, note ↔ message,
// reportingController ↔ reportingComponent, deprecated* ↔ the core fields). So the
// FailedScheduling event a scheduler records through events.k8s.io/v1 is what
// `kubectl describe pod` (core/v1 events) shows, and the other way round.

// eventAttrs are the selectable fields of a stored (core/v1) Event under both APIs' names:
// the two kinds share one watch cache, so they share one attribute function.
var eventAttrs = withFields(func(obj *unstructured.Unstructured, f fields.Set) {
	for _, name := range []string{"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"} {
		v := str(obj, "involvedObject", name)
		f["involvedObject."+name] = v
		f["regarding."+name] = v
	}
	f["reason"] = str(obj, "reason")
	f["reportingComponent"] = str(obj, "reportingComponent")
	f["reportingController"] = str(obj, "reportingComponent")
	src := firstNonEmpty(str(obj, "source", "component"), str(obj, "reportingComponent"))
	f["source"] = src
	f["deprecatedSource"] = src
	f["type"] = str(obj, "type")
})

// eventsV1FromStorage turns stored core/v1 Events into events.k8s.io/v1 Events.
func eventsV1FromStorage(_ context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		if o.GetAPIVersion() == eventsv1.SchemeGroupVersion.String() {
			out[i] = o
			continue
		}
		var in corev1.Event
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &in); err != nil {
			return nil, fmt.Errorf("stored event %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		var internal apicore.Event
		if err := corev1conv.Convert_v1_Event_To_core_Event(&in, &internal, nil); err != nil {
			return nil, err
		}
		var ev eventsv1.Event
		if err := eventsv1conv.Convert_core_Event_To_v1_Event(&internal, &ev, nil); err != nil {
			return nil, err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ev)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(eventsv1.SchemeGroupVersion.String())
		u.SetKind("Event")
		out[i] = u
	}
	return out, nil
}

// eventsV1ToStorage turns a validated events.k8s.io/v1 Event into the stored core/v1 form.
func eventsV1ToStorage(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var in eventsv1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &in); err != nil {
		return nil, err
	}
	var internal apicore.Event
	if err := eventsv1conv.Convert_v1_Event_To_core_Event(&in, &internal, nil); err != nil {
		return nil, err
	}
	var ev corev1.Event
	if err := corev1conv.Convert_core_Event_To_v1_Event(&internal, &ev, nil); err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ev)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Event")
	return u, nil
}
