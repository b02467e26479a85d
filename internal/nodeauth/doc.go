// Package nodeauth is Kube's Node authorizer: upstream's own (k8s.io/kubernetes
// plugin/pkg/auth/authorizer/node), fed by informers over a loopback client, behind the
// filters.Authorizer interface of the request chain.
//
// A node identity is the user system:node:<name> in the group system:nodes (what
// nodeidentifier.NewDefaultNodeIdentifier recognises). For such a user upstream's authorizer
// allows
//
//   - get, list and watch of its own Node (by name) and create/update/patch of Nodes and
//     nodes/status (NodeRestriction admission narrows those to its own Node);
//   - get of the pods bound to it, list/watch of pods with fieldSelector
//     spec.nodeName=<name>, update/patch of pods/status, create/delete of (mirror) pods and
//     create of pods/eviction (NodeRestriction narrows those to its own pods);
//   - get of the Secrets, ConfigMaps, PersistentVolumeClaims, PersistentVolumes and
//     ResourceClaims reachable from its pods in the graph (node <- pod <- secret, node <-
//     pod <- pvc <- pv <- secret, ...), and create of serviceaccounts/token for the service
//     accounts its pods run as;
//   - its own Lease in kube-node-lease, its CSINode, its ResourceSlices;
//   - everything the static bootstrappolicy.NodeRules grant every node (events, CSRs,
//     reading services and endpoints, ...).
//
// Anything else gets no opinion, and the next authorizer (RBAC) decides: Union composes
// them in upstream's mode order Node,RBAC. For users that are not nodes the authorizer has
// no opinion at all.
//
// The graph (Graph) is kept by upstream's AddGraphEventHandlers from pod, persistent-volume,
// volume-attachment (and, when served, resource-slice and pod-certificate-request)
// informers. Start waits until the server serves pods, persistentvolumes and
// volumeattachments before it starts them (a server without the workload kinds has no
// pods to authorize), so nothing logs list errors meanwhile; until then the graph is empty
// and nodes read only their own Node and what the static rules allow. Tests may feed the
// graph by hand (Graph().AddPod).
//
// Attributes adapts a request (request.User, request.Info and its raw field and label
// selectors) to the authorizer.Attributes upstream's authorizers take, as kube-apiserver's
// GetAuthorizerAttributes does; its decisions are table-tested in nodeauth_test.go.
//
// Reviews makes SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectAccessReview
// answer as the request path does: a review RBAC denies is asked of the node authorizer.
package nodeauth
