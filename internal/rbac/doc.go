// Package rbac is Kube's authorizer: Role-based access control as kube-apiserver's RBAC
// authorizer decides it.
//
// The decision is pure: Build turns the lists of Roles, ClusterRoles, RoleBindings and
// ClusterRoleBindings into an immutable Snapshot indexed by subject (user name, group,
// service-account user name), and Snapshot.Allows answers one request's Attributes without
// I/O. Authorizer is the thin shell around it: informers over a loopback client keep the
// snapshot current (rebuilt after each batch of changes, swapped atomically), and it
// implements the filter chain's Authorizer (system:masters is always allowed).
//
// Beside the decision the package holds what RBAC needs elsewhere in the server:
//   - Escalation, an admission.Interface that refuses Roles and bindings granting rights the
//     requesting user does not hold, unless they have the escalate or bind verb (upstream's
//     ConfirmNoEscalation);
//   - AggregationController, which keeps the rules of ClusterRoles with an aggregationRule
//     equal to the union of the ClusterRoles their selectors match;
//   - BootstrapPolicy, the default ClusterRoles (cluster-admin, admin, edit, view and their
//     aggregated parts) and ClusterRoleBindings created at start;
//   - the access reviews (SelfSubjectAccessReview, SubjectAccessReview,
//     SelfSubjectRulesReview) served as computed, never stored, kinds.
package rbac
