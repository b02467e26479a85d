package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// KillShims kills the containerd shims that serve the containerd whose socket lies under
// dir (their -address argument), and returns how many. A shim outlives its containerd by
// design (containers keep running across a containerd restart), so an agent's data
// directory that is being thrown away can leave one behind when its sandboxes were not
// removed through CRI first, or containerd lost track of them. Call it only once nothing
// should run there any more, after removing the sandboxes through CRI.
func KillShims(dir string) int {
	dir = filepath.Clean(dir) + string(filepath.Separator)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !shimOf(bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}), dir) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// shimOf reports whether argv is a containerd shim's whose -address lies under dir
// (ending in a separator). Pure.
func shimOf(argv [][]byte, dir string) bool {
	if len(argv) == 0 || !strings.HasPrefix(filepath.Base(string(argv[0])), "containerd-shim") {
		return false
	}
	for i, a := range argv {
		if string(a) == "-address" && i+1 < len(argv) {
			return strings.HasPrefix(string(argv[i+1]), dir)
		}
	}
	return false
}
