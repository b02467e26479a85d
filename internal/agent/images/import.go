package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Import loads the OCI or docker archive file into the k8s.io namespace of the containerd
// whose socket is given, unpacked for its default snapshotter, with containerd's own
// importer (the ctr binary shipped with containerd; CRI v1 has no import call).
func Import(ctx context.Context, socket, file string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", "--all-platforms", file)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("import %s: %w: %s", file, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ImportDir imports every *.tar in dir (none is no error).
func ImportDir(ctx context.Context, socket, dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("image dir: %w", err)
	}
	var done []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tar") {
			continue
		}
		f := filepath.Join(dir, e.Name())
		if err := Import(ctx, socket, f); err != nil {
			return done, err
		}
		done = append(done, f)
	}
	return done, nil
}
