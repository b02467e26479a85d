package platform

import (
	"context"
	"errors"
	"io"

	"kubeos.dev/kube/pkg/lifecycle"
)

// registerBackup registers the Backup kind (scheduled dumps into a Bucket).
func registerBackup(e *lifecycle.Engine, o Options) error { return nil }

// openBackupArchive opens archive (empty: the last successful one) of Backup backup in
// namespace for a restore, with the kind of the Backup's source (Database, Cache, Topic).
func openBackupArchive(ctx context.Context, o Options, namespace, backup, archive string) (sourceKind string, rc io.ReadCloser, err error) {
	return "", nil, errors.New("restoring from a Backup is not implemented yet")
}
