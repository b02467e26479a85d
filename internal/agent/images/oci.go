package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one entry of an image layer.
type File struct {
	// Path inside the image, without a leading slash ("bin/sh").
	Path string
	// Mode carries the type (fs.ModeDir, fs.ModeSymlink) and permissions.
	Mode fs.FileMode
	// Data is a regular file's content.
	Data []byte
	// Link is a symlink's target.
	Link string
}

// Config is the part of the OCI image configuration the agent uses.
type Config struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env,omitempty"`
	User       string   `json:"User,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
	StopSignal string   `json:"StopSignal,omitempty"`
}

// Layer is an uncompressed tar of files, in path order, owned by root, mtime 0. Pure.
func Layer(files []File) ([]byte, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(f.Mode.Perm()), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case f.Mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if f.Mode&fs.ModeSticky != 0 {
				h.Mode |= 0o1000
			}
		case f.Mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.Path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("layer %s: %w", f.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// WriteOCI writes an OCI image-layout tarball holding one image named ref (e.g.
// "kube.local/pause:1") for linux/arch with one layer of files and cfg.
func WriteOCI(w io.Writer, ref, arch string, cfg Config, files []File) error {
	layer, err := Layer(files)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch, "os": "linux", "config": cfg,
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: len(config)},
		"layers": []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digest(layer), Size: len(layer)}},
	})
	if err != nil {
		return err
	}
	tag := ref
	if i := strings.LastIndexAny(ref, ":/"); i >= 0 && ref[i] == ':' {
		tag = ref[i+1:]
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []descriptor{{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(manifest), Size: len(manifest),
			Annotations: map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
			Platform:    map[string]string{"architecture": arch, "os": "linux"}}},
	})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	for _, b := range [][]byte{layer, config, manifest} {
		if err := add("blobs/sha256/"+strings.TrimPrefix(digest(b), "sha256:"), b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteOCIFile is WriteOCI into a new file at path.
func WriteOCIFile(path, ref, arch string, cfg Config, files []File) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteOCI(f, ref, arch, cfg, files); err != nil {
		f.Close()
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return f.Close()
}
