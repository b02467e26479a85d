// Package storageversionmigration is the storage version migrator: a
// storagemigration.k8s.io/v1 StorageVersionMigration names a group-resource whose stored
// objects are rewritten, so that each is stored again in the resource's current storage
// version (and, through the storage's transformers, with the current encryption key). It
// runs as kube-controller-manager's storage-version-migrator-controller does, in three parts:
//
//   - upstream's migration runner (k8s.io/kubernetes/pkg/controller/storageversionmigrator,
//     NewCustomResourceController): one migration at a time per group-resource, oldest
//     first, marked Running=True (and a custom resource's CRD StorageMigrating=True); a
//     finished one gets Running=False MigrationCompleted;
//   - upstream's resource-version controller: status.resourceVersion, the resource's list
//     resourceVersion when the migration started (a resource without list/patch, or absent
//     from discovery for a minute, fails the migration);
//   - the migration itself (migrate.go, Kube's, because upstream's reads the objects from
//     the garbage collector's graph, which in Kube is its own): every object whose
//     resourceVersion is not newer than status.resourceVersion is merge-patched with its
//     apiVersion, kind and resourceVersion only — the server writes it back unchanged in the
//     storage version; a conflict or NotFound means it was rewritten or deleted meanwhile —
//     then Succeeded=True, or Failed=True with the error (retryable errors are retried, the
//     Running message counting what is left).
//
// Identity system:kube-controller:storage-version-migrator-controller; Lease
// kube-system/kube-storage-version-migrator-controller.
package storageversionmigration
