// Package startupmem gives a long-running process's start-up memory back: the pages of
// its own executable that only the start touched, and the start's heap garbage.
package startupmem

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// Release gives back what only the start needed. The kube binary holds
// the whole control plane; package initialisation and start-up touch pages of its code and
// read-only data that a running node agent (or any one role of it) never uses again, and they stay in its resident
// set. MADV_DONTNEED drops the executable's read-only private mappings whose pages are the
// file's own from the resident set: nothing is lost, a page touched again is read back from
// the page cache (a minor fault). Then the start's heap garbage goes back to the OS. It
// returns the bytes of the mappings advised.
//
// The RELRO segment is never advised. The dynamic loader writes it (the GOT's resolved
// addresses) and then makes it read-only, so it looks like any other read-only mapping in
// /proc/self/maps; dropping its pages would bring back the file's unrelocated zeros and the
// next call through the GOT would jump to address 0.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	relro, err := relroFileRange(exe)
	if err != nil {
		return 0, err
	}
	ranges, err := readOnlyMappings("/proc/self/maps", exe, relro)
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

// relroFileRange is the file offsets [lo, hi) of exe's PT_GNU_RELRO segment, widened to
// whole pages; [0, 0) when it has none (a static binary).
func relroFileRange(exe string) ([2]uint64, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return [2]uint64{}, err
	}
	defer f.Close()
	page := uint64(os.Getpagesize())
	for _, p := range f.Progs {
		if p.Type == elf.PT_GNU_RELRO {
			lo := p.Off &^ (page - 1)
			hi := (p.Off + p.Filesz + page - 1) &^ (page - 1)
			return [2]uint64{lo, hi}, nil
		}
	}
	return [2]uint64{}, nil
}

// readOnlyMappings are the address ranges of file's mappings in a /proc/<pid>/maps file
// that are private, not writable and do not overlap the file offsets in relro: their pages
// are always the file's own.
func readOnlyMappings(maps, file string, relro [2]uint64) ([][2]uintptr, error) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseReadOnlyMappings(bufio.NewScanner(f), filepath.Clean(file), relro)
}

// parseReadOnlyMappings reads maps lines ("start-end perms offset dev inode path"). Pure
// but for the scanner.
func parseReadOnlyMappings(s *bufio.Scanner, file string, relro [2]uint64) ([][2]uintptr, error) {
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
		off, err3 := strconv.ParseUint(fs[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || b <= a {
			continue
		}
		if relro[1] > relro[0] && off < relro[1] && off+(b-a) > relro[0] {
			continue // the loader's relocated, then protected, pages
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out, s.Err()
}
