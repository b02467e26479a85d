// Package rest is the one generic REST handler that serves every resource in the type
// registry, built-in or custom: get, list, watch, create, update, patch, delete and
// deletecollection, and the status subresource. It knows no resource by name: what differs
// between kinds lives in their registry.Kind (scope, strategy, columns, selectable fields).
//
// Reads of lists and watches are served by the watch cache; single reads and every write go
// to the store, whose compare-and-swap makes etcd the one truth. Errors become metav1.Status
// objects here, at exactly this boundary.
//
// Responses are JSON, or protobuf for built-in kinds when the client prefers it (objects,
// lists and watch streams alike, in kube-apiserver's wire form); PartialObjectMetadata
// answers are protobuf too when asked for (any kind: it is metadata only), Table answers
// JSON.
//
// Every create, update and patch records its field manager in metadata.managedFields, and
// server-side apply merges by owner (conflicts are 409s), through apimachinery's managedfields
// as kube-apiserver does (managed.go).
//
// Requests to connect subresources (pods/exec, ..., nodes/proxy) are admitted with
// operation CONNECT and their options as the object, then handed to the Connect handler
// (connect.go). Kinds whose reads are computed (registry.Kind.Read: ComponentStatus) are
// answered by their hook and never read from storage (computed.go).
package rest
