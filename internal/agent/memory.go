package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startupSettle is how long after its start the agent releases its start-up memory
// (releaseStartupMemory): its informers have synced, containerd is up and the images are
// imported by then.
const startupSettle = 30 * time.Second

// releaseStartupMemory gives back what only the agent's start needed. The kube binary holds
// the whole control plane; package initialisation and start-up touch pages of its code and
// read-only data that a running node agent never uses again, and they stay in its resident
// set. MADV_DONTNEED drops the executable's read-only private mappings from the resident
// set: nothing is lost, a page touched again is read back from the page cache (a minor
// fault). Then the start's heap garbage goes back to the OS. It returns the bytes of the
// mappings advised.
func releaseStartupMemory() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	ranges, err := readOnlyMappings("/proc/self/maps", exe)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range ranges {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r[0], r[1]-r[0], syscall.MADV_DONTNEED); errno != 0 {
			return n, fmt.Errorf("madvise %#x-%#x: %w", r[0], r[1], errno)
		}
		n += int64(r[1] - r[0])
	}
	debug.FreeOSMemory()
	return n, nil
}

// readOnlyMappings are the address ranges of file's mappings in a /proc/<pid>/maps file
// that are private and not writable (code, read-only data): their pages are always the
// file's own.
func readOnlyMappings(maps, file string) ([][2]uintptr, error) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseReadOnlyMappings(bufio.NewScanner(f), filepath.Clean(file))
}

// parseReadOnlyMappings reads maps lines ("start-end perms offset dev inode path"). Pure
// but for the scanner.
func parseReadOnlyMappings(s *bufio.Scanner, file string) ([][2]uintptr, error) {
	var out [][2]uintptr
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) < 6 || fs[5] != file {
			continue
		}
		perms := fs[1]
		if len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || b <= a {
			continue
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out, s.Err()
}

// releaseAfterStart runs releaseStartupMemory once, startupSettle after the agent started,
// unless ctx ends first.
func (a *Agent) releaseAfterStart(ctx context.Context) {
	t := time.NewTimer(startupSettle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	n, err := releaseStartupMemory()
	if err != nil {
		a.log.Warn("release start-up memory", "err", err)
		return
	}
	a.log.Info("released start-up memory", "readOnlyMappingsMB", n>>20)
}
