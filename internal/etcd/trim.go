package etcd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// dbPath is where an embedded member keeps its bbolt database under its data directory.
func dbPath(dataDir string) string { return filepath.Join(dataDir, "member", "snap", "db") }

// trimDatabase shrinks a member's bbolt file to the pages the database uses, before the member
// opens it. bbolt grows its file 16 MB at a time ahead of need, and etcd maps the file with
// MAP_POPULATE on Linux, so after every restart each page of the file, used or not, was
// resident: 16 MB for a fresh server's few hundred KB. A file cut at bbolt's high-water mark
// (the size its transactions see) is the same database; bbolt grows it again when it needs
// the room. A missing file is nothing to trim.
func trimDatabase(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	var used int64
	err = db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || used <= 0 || used >= fi.Size() {
		return err
	}
	return os.Truncate(path, used)
}
