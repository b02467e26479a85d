// Package ctl is `kube ctl`, also the kube binary's behaviour when invoked as kubectl-kube
// (the kubectl plugin `kubectl kube`): operator tooling for lifecycle-managed kinds.
//
//	health [-A] [--kind K] [-w]     counts by phase, Stalled/Failed, oldest Reconciling,
//	                                reconcile p99 and error rate, event bus; exit 2 when
//	                                anything is Failed or Stalled; -w redraws from watches
//	tree KIND/NAME [-D] [--depth N] [-o wide|json|yaml|dot] [-w]
//	                                dependencies (or dependents) of one object, each object
//	                                once (later: a back-reference), cycles marked, missing
//	                                dependencies and deletions with finalizers shown
//	why KIND/NAME                   the deepest object not Ready on the dependency path, its
//	                                conditions in full, last reconcile error, next attempt,
//	                                recent Events of each object on the path
//	why-stuck KIND/NAME             a deletion's remaining finalizers and who owns each,
//	                                dependents still there, time left before the deletion
//	                                timeout, audit entries of the UID since deletion began
//	audit [--uid] [--operator] [--phase] [--user] [--since] [-A] [-o json]
//	wait KIND/NAME --for=active [--timeout]
//	                                exit 0 on Active, non-zero at once (with the reason) on
//	                                Stalled or Failed, or on timeout
//
// Everything is read through the API with kubectl's flags and kubeconfig handling
// (genericclioptions): objects and Events directly, aggregates, graph walks and the audit
// log through the server's ops API (package opsapi, listed in discovery), which shows each user only what RBAC
// lets them read and counts what it withholds. Errors read like kubectl's
// (`Error from server (NotFound): ...`); [ExitError] carries the exit status to main.
//
// The decisions — rendering a graph as a tree, finding the blocker, naming finalizer owners,
// judging a wait — are pure functions with table tests; the commands are thin shells. What a
// page of a kind's list shows (filter, order, paging) is package listing, which the ops API
// and the dashboard share. Commands about one known kind (promote, abort) use the generated
// typed client (pkg/client); the others, about any lifecycle-managed kind, read dynamically.
package ctl
