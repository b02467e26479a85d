package agent

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseReadOnlyMappings(t *testing.T) {
	maps := `00400000-00c00000 r-xp 00000000 fd:00 123 /usr/bin/kube
00c00000-01800000 r--p 00800000 fd:00 123 /usr/bin/kube
01800000-01900000 rw-p 01400000 fd:00 123 /usr/bin/kube
01900000-01a00000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--s 00000000 fd:00 9 /usr/bin/kube
7f0000002000-7f0000003000 r-xp 00000000 fd:00 10 /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
bad line
`
	got, err := parseReadOnlyMappings(bufio.NewScanner(strings.NewReader(maps)), "/usr/bin/kube")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uintptr{{0x400000, 0xc00000}, {0xc00000, 0x1800000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %x, want %x", got, want)
		}
	}
}

// TestReleaseStartupMemory drops the test binary's own code and read-only data from its
// resident set; the test goes on running from the pages read back.
func TestReleaseStartupMemory(t *testing.T) {
	n, err := releaseStartupMemory()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no read-only mapping of the executable found")
	}
	if _, err := parseReadOnlyMappings(bufio.NewScanner(strings.NewReader("")), "x"); err != nil {
		t.Fatal(err)
	}
}
