// Package storage is Kube's versioned object store on etcd v3.
//
// Every object lives under one key, /registry/<group>/<resource>/[<namespace>/]<name> (the
// legacy core group is spelled "core"), holding the object's JSON with metadata.resourceVersion
// cleared. An object's resourceVersion is the etcd mod revision of its key, and a list's
// resourceVersion is the etcd revision it was read at, so a client can resume a watch from
// either. Every write is a compare-and-swap on the key's mod revision: two writers never
// overwrite each other silently.
//
// The semantics are those kube-apiserver gives its clients over etcd:
//
//   - Create fails with ErrAlreadyExists when the key exists.
//   - Get, List and Count read the latest state with a quorum read; List can also read an exact
//     past revision, page with limit and an opaque continue token (all pages come from the
//     first page's revision), and filter by label and field selectors.
//   - GuaranteedUpdate is read-modify-write retried on conflict; preconditions on UID and
//     resourceVersion fail with ErrConflict.
//   - Delete honours the same preconditions and returns the last state.
//   - Watch streams ADDED, MODIFIED and DELETED (with the last state) from any revision that is
//     not compacted, and BOOKMARK events from etcd's progress notifications.
//   - A revision that compaction removed answers ErrCompacted (the API turns it into 410 Gone);
//     one newer than the store's answers ErrFutureRevision.
//
// Errors returned by the store wrap one of the package's sentinels and can be inspected with
// errors.Is; *Error carries the key and revisions involved.
//
// A store can keep some resources in etcd clusters of their own, as kube-apiserver's
// --etcd-servers-overrides (Store.WithOverrides): the keys of such a resource are read,
// written and watched in its cluster, so its resourceVersions are that cluster's revisions
// (comparable only with one another, as upstream's), and each cluster is compacted on its
// own (one Compactor per Store.Clusters entry).
//
// The store never caches: package watchcache sits above it and serves lists and watches from
// memory.
package storage
