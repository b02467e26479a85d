package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"io/fs"
	"strings"
	"testing"
)

func TestPauseELF(t *testing.T) {
	f, err := elf.NewFile(bytes.NewReader(pauseELF()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC || len(f.Progs) != 1 || f.Entry != 0x400000+120 {
		t.Errorf("machine %v type %v progs %d entry %#x", f.Machine, f.Type, len(f.Progs), f.Entry)
	}
}

func TestWriteOCI(t *testing.T) {
	var buf bytes.Buffer
	files := []File{{Path: "bin", Mode: fs.ModeDir | 0o755}, {Path: "bin/x", Mode: 0o755, Data: []byte("x")}, {Path: "bin/y", Mode: fs.ModeSymlink, Link: "x"}}
	if err := WriteOCI(&buf, "kube.local/t:1", "amd64", Config{Cmd: []string{"x"}}, files); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	names := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		names[h.Name] = b
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(names["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	m := index.Manifests[0]
	if m.Annotations["io.containerd.image.name"] != "kube.local/t:1" || m.Annotations["org.opencontainers.image.ref.name"] != "1" {
		t.Errorf("annotations %v", m.Annotations)
	}
	if _, ok := names["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")]; !ok || names["oci-layout"] == nil {
		t.Errorf("manifest blob or oci-layout missing: %v", index)
	}
}
