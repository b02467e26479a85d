package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// LoadCA loads the CA of an existing PKI directory, and nothing else, for issuing client
// certificates outside the server (`kube certs user`). Unlike Ensure it never creates or
// renews a file; a missing CA is an error that names the directory.
func LoadCA(dir string) (*PKI, error) {
	p := &PKI{CAFile: filepath.Join(dir, CACertName), CAKeyFile: filepath.Join(dir, CAKeyName), now: time.Now}
	if _, _, err := readCert(p.CAFile); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pki: no CA in %s (has a server run with this data directory?)", dir)
	}
	if err := p.ensureCA(); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return p, nil
}
