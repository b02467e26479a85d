package api

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// generatedDirs are the subdirectories of pkg/client that hack/update-codegen.sh writes.
var generatedDirs = []string{"applyconfiguration", "clientset", "informers", "listers"}

// TestGeneratedClientsUpToDate regenerates pkg/client into a temporary directory with
// hack/update-codegen.sh --output-dir and fails, naming each file, when the checked-in code
// differs (a type, field or +genclient tag changed without regenerating).
func TestGeneratedClientsUpToDate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "update-codegen.sh"), "--output-dir", out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/update-codegen.sh --output-dir: %v\n%s", err, b)
	}
	diffs, err := diffTrees(filepath.Join(root, "pkg", "client"), out, generatedDirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("pkg/client is out of date (run hack/update-codegen.sh):\n  %s", strings.Join(diffs, "\n  "))
	}
}

// TestDiffTrees: the comparison finds a changed, a missing and an extra file, and nothing
// in identical trees or outside the compared directories.
func TestDiffTrees(t *testing.T) {
	mk := func(files map[string]string) string {
		dir := t.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	base := map[string]string{"clientset/a.go": "a", "listers/x/b.go": "b", "doc.go": "hand-written"}
	for _, tc := range []struct {
		name string
		gen  map[string]string
		want []string
	}{
		{"identical", map[string]string{"clientset/a.go": "a", "listers/x/b.go": "b"}, nil},
		{"changed", map[string]string{"clientset/a.go": "A", "listers/x/b.go": "b"}, []string{"changed: clientset/a.go"}},
		{"missing", map[string]string{"clientset/a.go": "a", "listers/x/b.go": "b", "listers/x/c.go": "c"}, []string{"missing: listers/x/c.go"}},
		{"extra", map[string]string{"clientset/a.go": "a"}, []string{"not generated: listers/x/b.go"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diffTrees(mk(base), mk(tc.gen), []string{"clientset", "listers"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("diffTrees = %q, want %q", got, tc.want)
			}
		})
	}
}

// diffTrees compares the files under dirs of have (checked in) and want (generated): one
// line per file that differs, is missing from have, or is in have but not generated.
func diffTrees(have, want string, dirs []string) ([]string, error) {
	read := func(root string) (map[string][]byte, error) {
		files := map[string][]byte{}
		for _, d := range dirs {
			err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				files[filepath.ToSlash(rel)] = b
				return nil
			})
			if err != nil && !os.IsNotExist(err) {
				return nil, fmt.Errorf("read %s: %w", root, err)
			}
		}
		return files, nil
	}
	h, err := read(have)
	if err != nil {
		return nil, err
	}
	w, err := read(want)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, b := range w {
		switch hb, ok := h[name]; {
		case !ok:
			out = append(out, "missing: "+name)
		case !bytes.Equal(hb, b):
			out = append(out, "changed: "+name)
		}
	}
	for name := range h {
		if _, ok := w[name]; !ok {
			out = append(out, "not generated: "+name)
		}
	}
	slices.Sort(out)
	return out, nil
}
