package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// SchemeGroupVersion is GroupVersion under the name the generated clients (pkg/client) and
// k8s.io conventions use.
var SchemeGroupVersion = GroupVersion

// Resource qualifies a resource name ("tenants") with the group: the listers' NotFound errors
// name it.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind qualifies a kind name ("Tenant") with the group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}
