package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"kubeos.dev/kube/internal/apiserver/request"
)

// Operation is what a request does to an object.
type Operation string

// Operations, spelled as in admission.k8s.io/v1 AdmissionReview.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
	// Connect is a request to a connect subresource (pods/exec, pods/attach,
	// pods/portforward, pods/proxy, services/proxy, nodes/proxy): its Object is the
	// subresource's options (v1 PodExecOptions, ...), which carry no metadata; OldObject
	// and Options are nil.
	Connect Operation = "CONNECT"
)

// Attributes describe one admission request.
type Attributes struct {
	Operation   Operation
	Kind        schema.GroupVersionKind
	Resource    schema.GroupVersionResource
	Subresource string
	Namespace   string
	Name        string
	// Namespaced says the resource is namespaced (for rules' scope).
	Namespaced bool
	// Object is the proposed object (nil for Delete; the options for Connect); Admit may
	// change it in place.
	Object *unstructured.Unstructured
	// OldObject is the stored object (nil for Create).
	OldObject *unstructured.Unstructured
	// User is who asks.
	User *request.User
	// DryRun says nothing will be persisted: plugins with side effects must not run.
	DryRun bool
	// Options are the request's CreateOptions, UpdateOptions or DeleteOptions as JSON-ready
	// values (may be nil).
	Options map[string]any
	// Internal and OldInternal, when set (validating admission only), are Object and
	// OldObject in upstream's internal types, as the kind's validation converted them a
	// moment before: plugins that read upstream's types use them instead of converting
	// again. Read-only.
	Internal, OldInternal runtime.Object
	// Admitted and AdmittedOld, set by mutating admission, are Object and OldObject in
	// upstream's internal types as the built-in plugins left them (Object's changes written
	// back into Object.Object); Admitted stands for Object only while Object.Object is the
	// map AdmittedContent. The handler hands them to the kind's validation
	// (registry.Validated) so that it does not convert the objects again.
	Admitted, AdmittedOld runtime.Object
	AdmittedContent       map[string]any
	// Versioned, when set, is Object's content as a typed object of its version, as the
	// kind's defaulting made it (registry.TypedPreparer); plugins that read upstream's types
	// convert it instead of the content. It is handed over: admission may change it.
	Versioned runtime.Object
	// TypeConverter returns the kind's structured-merge-diff type converter (for
	// MutatingAdmissionPolicies' ApplyConfigurations); nil: the deduced one.
	TypeConverter func() managedfields.TypeConverter
}

// Interface is admission as the REST handler calls it.
type Interface interface {
	// Admit runs mutating admission; it may change a.Object.
	Admit(ctx context.Context, a *Attributes) error
	// Validate runs validating admission; it must not change anything.
	Validate(ctx context.Context, a *Attributes) error
}
