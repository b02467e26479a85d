package registry

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventsV1EventKind is events.k8s.io/v1 Event, stored with core/v1 Events as in
// kube-apiserver (events_storage.go), validated as kube-apiserver validates writes through
// its API.
func eventsV1EventKind() *Kind {
	k := kindBase("events.k8s.io", "v1", "events", "event", func() *eventsv1.Event { return &eventsv1.Event{} }, func() *eventsv1.EventList { return &eventsv1.EventList{} })
	k.ShortNames = []string{"ev"}
	k.Namespaced = true
	k.FullColumns = true
	k.Columns = eventColumns(eventsV1View)
	// Stored with core Events (events_storage.go).
	k.StorageGroup = CoreGroup
	k.FromStorage, k.ToStorage = eventsV1FromStorage, eventsV1ToStorage
	k.Attrs = eventAttrs
	k.Strategy = &typedStrategy[*eventsv1.Event]{
		namespaced: true,
		name:       nameDNSSubdomain,
		newObj:     func() *eventsv1.Event { return &eventsv1.Event{} },
		validate: func(e *eventsv1.Event) field.ErrorList {
			var errs field.ErrorList
			if e.EventTime.IsZero() {
				errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
			}
			if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
				errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
			}
			if !e.DeprecatedFirstTimestamp.IsZero() {
				errs = append(errs, field.Invalid(field.NewPath("deprecatedFirstTimestamp"), "", "needs to be unset"))
			}
			if !e.DeprecatedLastTimestamp.IsZero() {
				errs = append(errs, field.Invalid(field.NewPath("deprecatedLastTimestamp"), "", "needs to be unset"))
			}
			if e.DeprecatedCount != 0 {
				errs = append(errs, field.Invalid(field.NewPath("deprecatedCount"), "", "needs to be unset"))
			}
			if e.DeprecatedSource.Component != "" || e.DeprecatedSource.Host != "" {
				errs = append(errs, field.Invalid(field.NewPath("deprecatedSource"), "", "needs to be unset"))
			}
			if s := e.Series; s != nil {
				if s.Count < 2 {
					errs = append(errs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
				}
				if s.LastObservedTime.IsZero() {
					errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
				}
			}
			return append(errs, validateEventCommon(e.Namespace, e.Regarding.Namespace, e.EventTime.IsZero(),
				"reportingController", e.ReportingController, e.ReportingInstance, e.Action, e.Reason, "note", e.Note,
				field.NewPath("regarding", "namespace"))...)
		},
	}
	return &k
}

func leaseKind() *Kind {
	k := kindBase("coordination.k8s.io", "v1", "leases", "lease", func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
	k.Namespaced = true
	k.Columns = []Column{{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"],
		Cell: func(obj *unstructured.Unstructured) any { return str(obj, "spec", "holderIdentity") }}}
	k.Strategy = &typedStrategy[*coordinationv1.Lease]{
		namespaced: true,
		name:       nameDNSSubdomain,
		newObj:     func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		validate: func(l *coordinationv1.Lease) field.ErrorList {
			var errs field.ErrorList
			spec := field.NewPath("spec")
			if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
				errs = append(errs, field.Invalid(spec.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
			}
			if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
				errs = append(errs, field.Invalid(spec.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
			}
			return errs
		},
	}
	return &k
}
