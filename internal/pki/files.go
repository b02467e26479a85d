package pki

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// tmpInfix marks temporary files of writeFileAtomic, named ".<name>.tmp-<random>".
const tmpInfix = ".tmp-"

// writeFileAtomic replaces path with data and mode: it writes a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory, so readers and a crash
// see either the old or the new content, never part of it.
func writeFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+tmpInfix+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: not every filesystem can sync a directory
		_ = d.Close()
	}
	return nil
}

// readPEM reads path and decodes its one PEM block of the given types. A missing file returns
// an error satisfying errors.Is(err, fs.ErrNotExist); anything unusable wraps ErrCorrupt.
func readPEM(path string, types ...string) (*pem.Block, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, nil, fmt.Errorf("%w: %s: no PEM block (truncated or not PEM)", ErrCorrupt, path)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		// Trailing garbage is how a partial overwrite by another tool would look.
		if next, _ := pem.Decode(rest); next == nil {
			return nil, nil, fmt.Errorf("%w: %s: unexpected data after the PEM block", ErrCorrupt, path)
		}
	}
	for _, t := range types {
		if block.Type == t {
			return block, data, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: %s: PEM block %q, want %q", ErrCorrupt, path, block.Type, types)
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, []byte, error) {
	block, data, err := readPEM(path, "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return cert, data, nil
}

// readKey reads a PKCS#8, SEC1 or PKCS#1 private key and tightens the file's mode to 0600.
func readKey(path string) (crypto.Signer, []byte, error) {
	block, data, err := readPEM(path, "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	key, err := parsePrivateKey(block)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, nil, fmt.Errorf("tightening mode of %s: %w", path, err)
		}
	}
	return key, data, nil
}

func parsePrivateKey(block *pem.Block) (crypto.Signer, error) {
	switch block.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key type %T cannot sign", k)
	}
	return s, nil
}

// readPublicKey reads a PKIX "PUBLIC KEY" PEM file.
func readPublicKey(path string) (crypto.PublicKey, error) {
	block, _, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return pub, nil
}
