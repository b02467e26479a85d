// Package opsapi is the wire format of the read APIs kube server serves for operator tooling
// under /apis/ops.kubeos.dev/v1alpha1 (internal/server/ops.go) and kube ctl reads
// (internal/ctl). They are virtual resources: nothing is stored, each GET is computed from
// the lifecycle engine's incremental aggregates or the audit log, and RBAC authorizes them per
// namespace like any resource:
//
//	GET .../healths                             health of every kind, all namespaces
//	GET .../namespaces/NS/healths               health of the namespaced kinds in NS
//	GET .../graphs/NAME?kind=K                  dependency walk from a cluster-scoped object
//	GET .../namespaces/NS/graphs/NAME?kind=K    ... from a namespaced one
//	GET .../auditevents, .../namespaces/NS/auditevents
//	GET .../objects?kind=K, .../namespaces/NS/objects?kind=K
//	                                            one page of a kind's objects, filtered and
//	                                            sorted by the server (phase, q, sort, limit,
//	                                            offset; internal/ctl/listing)
//
// The filter chain authorizes the virtual resource (list healths, get graphs, list
// auditevents in NS, granted to view by the kubeos:ops-view ClusterRole); the handler then
// shows only what the user may read: a kind's aggregates need list on that kind in the scope,
// a graph node get on that object, an audit entry get on its object, a page of objects list on
// that kind in the scope (exactly the right a list of the kind itself needs). What is withheld is
// counted in Hidden, never named.
package opsapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Group and Version of the ops API; the resources it serves.
const (
	Group                 = "ops.kubeos.dev"
	Version               = "v1alpha1"
	ResourceHealths       = "healths"
	ResourceGraphs        = "graphs"
	ResourceAuditEvents   = "auditevents"
	ResourceObjects       = "objects"
	DirectionDependencies = "dependencies"
	DirectionDependents   = "dependents"
)

// HealthList is the health of the lifecycle-managed kinds in one namespace or all.
type HealthList struct {
	metav1.TypeMeta `json:",inline"`
	// Namespace is the scope ("" for all namespaces).
	Namespace string       `json:"namespace,omitempty"`
	Items     []KindHealth `json:"items"`
	// Hidden lists kinds whose aggregates the user may not read in this scope.
	Hidden   []HiddenKind `json:"hidden,omitempty"`
	EventBus BusState     `json:"eventBus"`
}

// KindHealth aggregates one kind's objects in the scope.
type KindHealth struct {
	Kind       string         `json:"kind"`
	Resource   string         `json:"resource"`
	Namespaced bool           `json:"namespaced"`
	Total      int            `json:"total"`
	Phases     map[string]int `json:"phases"`
	// Stalled counts objects whose Stalled condition is True; Failed those in phase Failed.
	Stalled int `json:"stalled"`
	Failed  int `json:"failed"`
	// OldestReconciling names the object longest in phase Reconciling.
	OldestReconciling string       `json:"oldestReconciling,omitempty"`
	ReconcilingSince  *metav1.Time `json:"reconcilingSince,omitempty"`
	// Reconciles, Errors and ReconcileP99Seconds come from the server's engine (all
	// namespaces, since the server started; zero on a server not holding the Lease).
	Reconciles          uint64  `json:"reconciles"`
	Errors              uint64  `json:"errors"`
	ReconcileP99Seconds float64 `json:"reconcileP99Seconds"`
}

// HiddenKind is a kind left out, and why.
type HiddenKind struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// BusState is the lifecycle event bus as the server sees it.
type BusState struct {
	Backend string `json:"backend"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// Graph is a walk of the dependency graph from Root in Direction, each object once.
type Graph struct {
	metav1.TypeMeta `json:",inline"`
	Root            string `json:"root"`
	Direction       string `json:"direction"`
	// Depth is the walk's limit (0: none).
	Depth int    `json:"depth,omitempty"`
	Nodes []Node `json:"nodes"`
	// Hidden counts objects reached that the user may not read (shown as placeholders, not
	// walked further).
	Hidden int `json:"hidden,omitempty"`
}

// Node is one object of a Graph.
type Node struct {
	// ID is Kind/namespace/name (Kind/name when cluster-scoped), or hidden-N.
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Resource  string `json:"resource,omitempty"`
	// Hidden: the user may not read it. Missing: it does not exist (a dependency named but
	// never created, or already gone).
	Hidden  bool `json:"hidden,omitempty"`
	Missing bool `json:"missing,omitempty"`

	UID               string             `json:"uid,omitempty"`
	Phase             string             `json:"phase,omitempty"`
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
	CreationTimestamp *metav1.Time       `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *metav1.Time       `json:"deletionTimestamp,omitempty"`
	Finalizers        []string           `json:"finalizers,omitempty"`
	// LastError, LastReconcile and NextAttempt are the engine's (on the server holding the
	// controllers' Lease).
	LastError     string       `json:"lastError,omitempty"`
	LastReconcile *metav1.Time `json:"lastReconcile,omitempty"`
	NextAttempt   *metav1.Time `json:"nextAttempt,omitempty"`
	// DeletionTimeoutSeconds is the kind's deletion timeout.
	DeletionTimeoutSeconds float64 `json:"deletionTimeoutSeconds,omitempty"`
	// Edges are the IDs one step further in the walk's direction, sorted; Truncated is set
	// when the depth limit stopped the walk here.
	Edges     []string `json:"edges,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
}

// AuditList is the audit entries matching a query, oldest first.
type AuditList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []auditv1.Event `json:"items"`
	// Hidden counts matching entries about objects the user may not read, among those the
	// search read (it reads the log from its end and stops past the limit or since).
	Hidden int `json:"hidden,omitempty"`
	// Truncated is set when more entries matched than the limit.
	Truncated bool `json:"truncated,omitempty"`
}

// ObjectList is one page of a lifecycle-managed kind's objects in a namespace or all, filtered
// and ordered by the server from its informer copies (internal/ctl/listing decides).
type ObjectList struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectKind is the kind listed (Kind is the list's own, ObjectList).
	ObjectKind string `json:"objectKind"`
	Namespace  string `json:"namespace,omitempty"`
	// Matched is how many objects passed the filter; Items are the page of them from Offset.
	Matched int         `json:"matched"`
	Offset  int         `json:"offset"`
	Items   []ObjectRow `json:"items"`
}

// ObjectRow is what a list shows of one object.
type ObjectRow struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Phase is status.phase as kube ctl reads it: Pending when never written, Deleting once
	// the object is being deleted.
	Phase string `json:"phase"`
	// Ready is the Ready condition's status; Reason and Message the first abnormal
	// condition's (Stalled or Reconciling True), else Ready's.
	Ready             string             `json:"ready,omitempty"`
	Reason            string             `json:"reason,omitempty"`
	Message           string             `json:"message,omitempty"`
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
	CreationTimestamp metav1.Time        `json:"creationTimestamp"`
	Deleting          bool               `json:"deleting,omitempty"`
}
