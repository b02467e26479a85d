package startupmem

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

func TestReleasable(t *testing.T) {
	// The kube binary's layout after the loader ran (gdb's view of fe920f7's build): the
	// read-only data segment's last page and the RELRO page (0xdc02000, written by the
	// loader and then made read-only) are the same page of the file, offset 0xd801000.
	smaps := `00400000-02d0f000 r--p 00000000 fd:00 123 /usr/bin/kube
Size:              43068 kB
Rss:               20000 kB
Anonymous:             0 kB
02d0f000-07e9e000 r-xp 0290f000 fd:00 123 /usr/bin/kube
Rss:               80000 kB
Anonymous:             0 kB
07e9e000-0dc02000 r--p 07a9e000 fd:00 123 /usr/bin/kube
Rss:               90000 kB
Anonymous:             0 kB
0dc02000-0dc03000 r--p 0d801000 fd:00 123 /usr/bin/kube
Rss:                   4 kB
Anonymous:             4 kB
0dc03000-0ddf3000 rw-p 0d802000 fd:00 123 /usr/bin/kube
Anonymous:          1700 kB
0ddf3000-0df00000 rw-p 00000000 00:00 0
Anonymous:          1000 kB
7f0000000000-7f0000001000 r--s 00000000 fd:00 9 /usr/bin/kube
Anonymous:             0 kB
7f0000002000-7f0000003000 r-xp 00000000 fd:00 10 /usr/lib/libc.so.6
Anonymous:             0 kB
7f0000004000-7f0000005000 r--p 00001000 fd:00 123 /usr/bin/kube
bad line
`
	ms, err := parseSmaps(bufio.NewScanner(strings.NewReader(smaps)), "/usr/bin/kube")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("parsed %d mappings of /usr/bin/kube, want 7: %+v", len(ms), ms)
	}
	all := [][2]uintptr{{0x400000, 0x2d0f000}, {0x2d0f000, 0x7e9e000}, {0x7e9e000, 0xdc02000}}
	for _, c := range []struct {
		name  string
		relro [2]uintptr
		want  [][2]uintptr
	}{
		{"relro by address", [2]uintptr{0xdc02000, 0xdc03000}, all},
		// Without the ELF's RELRO (say, unreadable), the loader's page is still kept by its
		// private copy; a mapping with no Anonymous line at all is kept too.
		{"relro by private pages", [2]uintptr{}, all},
		{"relro inside the code", [2]uintptr{0x3000000, 0x3001000}, [][2]uintptr{all[0], all[2]}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := releasable(ms, c.relro)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %x, want %x", got, c.want)
			}
		})
	}
}

// TestReleaseStartupMemory drops the test binary's own code and read-only data from its
// resident set; the test goes on running from the pages read back, including calls into
// the C library through the GOT (the cgo resolver and user lookup), which jumped to address
// 0 when the RELRO page was dropped too.
func TestReleaseStartupMemory(t *testing.T) {
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no read-only mapping of the executable found")
	}
	if _, err := user.Current(); err != nil {
		t.Fatal(err)
	}
	r := &net.Resolver{PreferGo: false}
	_, _ = r.LookupHost(t.Context(), "localhost")
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Current(); err != nil {
		t.Fatal(err)
	}
	// The later trims: DONTNEED alone, the same mappings.
	if m, err := Trim(); err != nil || m != n {
		t.Fatalf("Trim: %d bytes, %v; Release advised %d", m, err, n)
	}
	if _, err := user.Current(); err != nil {
		t.Fatal(err)
	}
	if statusKB("RssFile:") <= 0 || statusKB("VmRSS:") <= 0 {
		t.Fatalf("RssFile %d kB, VmRSS %d kB: /proc/self/status not read", statusKB("RssFile:"), statusKB("VmRSS:"))
	}
}

// TestReleaseExternallyLinked builds a program linked as the kube binary is (cgo, external
// linker: the loader relocates a GOT and then protects it read-only) and runs it: Release,
// then C calls through the GOT. Before RELRO was excluded, the process died with SIGSEGV at
// PC 0 (issue 16's agents, 30 s after their start).
func TestReleaseExternallyLinked(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "relro")
	build := exec.Command("go", "build", "-ldflags=-linkmode=external", "-o", bin, "./testdata/relro")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if relro, err := relroRange(bin, nil); err != nil || relro[1] == 0 {
		t.Fatalf("the test program has no RELRO segment (%v, %v): it cannot show the fault", relro, err)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("after Release: %v\n%s", err, out)
	}
}
