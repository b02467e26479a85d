package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestEntryName(t *testing.T) {
	for in, want := range map[string]string{"a/b": "a/b", "./a": "a", "a/../b": "b", ".": "", "./": ""} {
		if got, err := entryName(in); err != nil || got != want {
			t.Errorf("entryName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"/etc/passwd", "..", "../x", "a/../../x"} {
		if _, err := entryName(bad); err == nil {
			t.Errorf("entryName(%q) accepted", bad)
		}
	}
}

func TestLocalVolumesRoundTrip(t *testing.T) {
	ctx := context.Background()
	v := LocalVolumes{Dir: t.TempDir()}
	dir, err := v.Create("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o777 {
		t.Errorf("mode %v, want 0777", fi.Mode().Perm())
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("hello"), 0o640))
	must(os.Symlink("sub/f.txt", filepath.Join(dir, "link")))
	var buf bytes.Buffer
	must(v.Archive(ctx, "pvc-1", &buf))
	must(v.Restore(ctx, "pvc-2", bytes.NewReader(buf.Bytes())))
	b, err := os.ReadFile(filepath.Join(v.Dir, "pvc-2", "link"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("restored link reads %q, %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(v.Dir, "pvc-2", "sub", "f.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("restored mode %v", fi.Mode().Perm())
	}
	must(v.Remove("pvc-1"))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("removed directory: %v", err)
	}
	if err := v.Archive(ctx, "pvc-1", &buf); err == nil {
		t.Error("archive of a removed volume succeeded")
	}
	for _, bad := range []string{"../x", "a/b", ""} {
		if _, err := v.Create(bad); err == nil {
			t.Errorf("Create(%q) accepted", bad)
		}
	}
}

func TestLocalVolumesRestoreRefusesEscapes(t *testing.T) {
	v := LocalVolumes{Dir: t.TempDir()}
	outside := filepath.Join(t.TempDir(), "outside")
	for name, entries := range map[string][]tar.Header{
		"dotdot":       {{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute":     {{Name: outside, Typeflag: tar.TypeReg, Mode: 0o644}},
		"through link": {{Name: "l", Typeflag: tar.TypeSymlink, Linkname: filepath.Dir(outside)}, {Name: "l/outside", Typeflag: tar.TypeReg, Mode: 0o644}},
	} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, h := range entries {
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		zw.Close()
		if err := v.Restore(context.Background(), "pvc-x", &buf); err == nil {
			t.Errorf("%s: restore accepted", name)
		}
		if _, err := os.Stat(outside); err == nil {
			t.Fatalf("%s: a file was written outside the volume", name)
		}
	}
}
