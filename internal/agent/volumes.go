package agent

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"kubeos.dev/kube/internal/agent/server"
)

// LocalVolumes are the node's local-path volume directories, <data dir>/volumes/<pv>: the
// local-path provisioner asks the agent's API to make one (POST /volumes/<pv>) and, once the
// PersistentVolume is released with reclaimPolicy Delete, to remove it (DELETE) before it
// removes the PV's finalizer; a Backup of a Volume reads and writes its files as a gzipped
// tar (GET/PUT /volumes/<pv>/archive). Nodes may not list PersistentVolumes (the Node
// authorizer), so the cleanup is driven by the provisioner rather than by a watch here.
type LocalVolumes struct {
	// Dir holds one directory per PersistentVolume.
	Dir string
}

var _ server.Volumes = LocalVolumes{}

func (v LocalVolumes) path(pv string) (string, error) {
	if err := server.ValidVolumeName(pv); err != nil {
		return "", err
	}
	return filepath.Join(v.Dir, pv), nil
}

// Create makes pv's directory, mode 0777 as local-path-provisioner does (any pod user may
// write to it).
func (v LocalVolumes) Create(pv string) (string, error) {
	dir, err := v.path(pv)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("volume %s: %w", pv, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", fmt.Errorf("volume %s: %w", pv, err)
	}
	return dir, nil
}

// Remove removes pv's directory.
func (v LocalVolumes) Remove(pv string) error {
	dir, err := v.path(pv)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("volume %s: %w", pv, err)
	}
	return nil
}

// Archive writes a gzipped tar of pv's directory (regular files, directories and symlinks,
// names relative to it) to w.
func (v LocalVolumes) Archive(ctx context.Context, pv string, w io.Writer) error {
	dir, err := v.path(pv)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", pv, server.ErrNoVolume)
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, fifos, devices: not data
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("volume %s: archive: %w", pv, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// Restore unpacks a gzipped tar into pv's directory through an os.Root, so that no entry
// (a "../" name, an absolute name, a path through a symlink) lands outside it.
func (v LocalVolumes) Restore(ctx context.Context, pv string, r io.Reader) error {
	dir, err := v.Create(pv)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("volume %s: %w", pv, err)
	}
	defer root.Close()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("volume %s: restore: %w", pv, err)
	}
	tr := tar.NewReader(zr)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("volume %s: restore: %w", pv, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return fmt.Errorf("volume %s: restore: %w", pv, err)
		}
		if name == "" {
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o777); err != nil {
				return fmt.Errorf("volume %s: restore %s: %w", pv, name, err)
			}
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o777); err != nil {
				return fmt.Errorf("volume %s: restore %s: %w", pv, name, err)
			}
			_ = root.Chmod(name, mode)
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
			if err != nil {
				return fmt.Errorf("volume %s: restore %s: %w", pv, name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("volume %s: restore %s: %w", pv, name, err)
			}
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("volume %s: restore %s: %w", pv, name, err)
			}
		default:
			// hard links, devices, fifos: not restored
		}
	}
}

// entryName is a tar entry's name inside the volume ("" for the root itself), or an error
// for a name that leaves it. Pure.
func entryName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("entry %q: absolute name", n)
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("entry %q: outside the volume", n)
	}
	return c, nil
}
