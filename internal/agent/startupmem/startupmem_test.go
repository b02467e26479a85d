package startupmem

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReadOnlyMappings(t *testing.T) {
	// The layout of a dynamically linked kube binary after the loader ran: the RELRO page
	// (file offset 0xd7b7000) was written and then made read-only.
	maps := `00400000-00c00000 r--p 00000000 fd:00 123 /usr/bin/kube
00c00000-01800000 r-xp 00800000 fd:00 123 /usr/bin/kube
0dbb7000-0dbb8000 r--p 0d7b7000 fd:00 123 /usr/bin/kube
0dbb8000-0dbd0000 rw-p 0d7b8000 fd:00 123 /usr/bin/kube
01900000-01a00000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--s 00000000 fd:00 9 /usr/bin/kube
7f0000002000-7f0000003000 r-xp 00000000 fd:00 10 /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
bad line
`
	for _, c := range []struct {
		name  string
		relro [2]uint64
		want  [][2]uintptr
	}{
		{"dynamic", [2]uint64{0xd7b7000, 0xd7b8000}, [][2]uintptr{{0x400000, 0xc00000}, {0xc00000, 0x1800000}}},
		{"static", [2]uint64{}, [][2]uintptr{{0x400000, 0xc00000}, {0xc00000, 0x1800000}, {0xdbb7000, 0xdbb8000}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseReadOnlyMappings(bufio.NewScanner(strings.NewReader(maps)), "/usr/bin/kube", c.relro)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %x, want %x", got, c.want)
			}
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("got %x, want %x", got, c.want)
				}
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
	if relro, err := relroFileRange(bin); err != nil || relro[1] == 0 {
		t.Fatalf("the test program has no RELRO segment (%v, %v): it cannot show the fault", relro, err)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("after Release: %v\n%s", err, out)
	}
}
