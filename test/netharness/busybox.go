package netharness

import (
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"kubeos.dev/kube/internal/agent/images"
)

// writeBusybox writes an OCI archive of busybox-static with one symlink per applet.
func writeBusybox(path string) error {
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return err
	}
	files := []images.File{
		{Path: "bin", Mode: fs.ModeDir | 0o755}, {Path: "bin/busybox", Mode: 0o755, Data: bin},
		{Path: "etc", Mode: fs.ModeDir | 0o755}, {Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			files = append(files, images.File{Path: "bin/" + a, Mode: fs.ModeSymlink | 0o777, Link: "busybox"})
		}
	}
	return images.WriteOCIFile(path, BusyboxImage, "amd64", images.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}}, files)
}
