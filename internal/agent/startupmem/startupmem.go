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

	"golang.org/x/sys/unix"
)

// Release gives back what only the start needed. The kube binary holds
// the whole control plane; package initialisation and start-up touch pages of its code and
// read-only data that a running node agent (or any one role of it) never uses again, and they stay in its resident
// set. MADV_DONTNEED drops the executable's read-only private mappings whose pages are the
// file's own from the resident set: nothing is lost, a page touched again is read back from
// the page cache (a minor fault). Then the start's heap garbage goes back to the OS. It
// returns the bytes of the mappings advised.
//
// File systems that keep the page cache in large folios (ext4 and XFS on recent kernels;
// a binary written by go build or cp is cached in 2 MiB folios) map a whole folio on a
// fault, so every page the running process touches again brings its 2 MiB back: seen on
// this machine (6.18, ext4), 100 MB of the kube binary resident again within 5 s of a
// DONTNEED. So the mappings are first marked MADV_NOHUGEPAGE (no PMD mappings) and
// MADV_RANDOM (no read-ahead: a page read again comes in alone), and MADV_PAGEOUT evicts
// the folios only this process maps from the page cache: what is touched again is read
// back in small folios, the kernel's fault-around (64 KiB) at most. Folios that other
// processes map (a kube server on the same machine) stay cached and are only unmapped.
//
// A mapping is advised only when none of its pages is a private copy (smaps' Anonymous is
// 0) and it does not hold the RELRO segment. The dynamic loader writes the RELRO segment
// (the GOT's resolved addresses) and then makes it read-only, so it looks like any other
// read-only mapping; dropping its pages would bring back the file's unrelocated zeros and
// the next call through the GOT would jump to address 0. RELRO is matched by address, not
// by file offset: the last page of the read-only data segment and the RELRO page may be
// the same page of the file, mapped twice.
func Release() (int64, error) {
	n, err := advise(true)
	debug.FreeOSMemory()
	return n, err
}

// Trim drops the executable's pages from the resident set again, as Release does but
// without its hints and page-cache eviction: after Release, what the process touched
// again was read back in small folios, and DONTNEED alone returns it for minor faults.
// For a process that touches code now and then (a burst of pod starts) and idles after.
func Trim() (int64, error) {
	return advise(false)
}

// advise advises the executable's releasable mappings: the hints and MADV_PAGEOUT first
// when first is set, then MADV_DONTNEED. It returns the bytes of the mappings advised.
func advise(first bool) (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	ms, err := parseSmaps(bufio.NewScanner(f), filepath.Clean(exe))
	f.Close()
	if err != nil {
		return 0, err
	}
	relro, err := relroRange(exe, ms)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range releasable(ms, relro) {
		if first {
			// Hints first; a kernel without one of them (no THP, before 5.4's
			// MADV_PAGEOUT) still gets the DONTNEED.
			for _, advice := range []int{unix.MADV_NOHUGEPAGE, unix.MADV_RANDOM, unix.MADV_PAGEOUT} {
				_ = madvise(r, advice)
			}
		}
		if err := madvise(r, unix.MADV_DONTNEED); err != nil {
			return n, fmt.Errorf("madvise %#x-%#x: %w", r[0], r[1], err)
		}
		n += int64(r[1] - r[0])
	}
	return n, nil
}

// madvise advises the address range r (outside the Go heap: the executable's mappings).
func madvise(r [2]uintptr, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// mapping is one of the executable's mappings in /proc/self/smaps.
type mapping struct {
	lo, hi uintptr
	perms  string
	off    uint64
	anonKB int64 // pages that are private copies (written, or relocated by the loader)
}

// releasable are the address ranges of ms that are private, not writable, hold no private
// copy and do not overlap relro (addresses [lo, hi)): their pages are always the file's own.
func releasable(ms []mapping, relro [2]uintptr) [][2]uintptr {
	var out [][2]uintptr
	for _, m := range ms {
		if len(m.perms) != 4 || m.perms[0] != 'r' || m.perms[1] != '-' || m.perms[3] != 'p' || m.anonKB != 0 {
			continue
		}
		if relro[1] > relro[0] && m.lo < relro[1] && m.hi > relro[0] {
			continue
		}
		out = append(out, [2]uintptr{m.lo, m.hi})
	}
	return out
}

// relroRange is the addresses of exe's PT_GNU_RELRO segment in this process, widened to
// whole pages; [0, 0) when it has none (a static binary). A position-independent exe's
// addresses are shifted by where its first segment (file offset 0) was mapped.
func relroRange(exe string, ms []mapping) ([2]uintptr, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return [2]uintptr{}, err
	}
	defer f.Close()
	page := uint64(os.Getpagesize())
	var bias uint64
	if f.Type == elf.ET_DYN {
		first := ^uint64(0)
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD {
				first = min(first, p.Vaddr&^(page-1))
			}
		}
		for _, m := range ms {
			if m.off == 0 && first != ^uint64(0) {
				bias = uint64(m.lo) - first
				break
			}
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_GNU_RELRO {
			lo := (p.Vaddr + bias) &^ (page - 1)
			hi := (p.Vaddr + bias + p.Memsz + page - 1) &^ (page - 1)
			return [2]uintptr{uintptr(lo), uintptr(hi)}, nil
		}
	}
	return [2]uintptr{}, nil
}

// parseSmaps reads file's mappings from a /proc/<pid>/smaps file: header lines
// ("start-end perms offset dev inode path") each followed by "Field: value kB" lines. Pure
// but for the scanner.
func parseSmaps(s *bufio.Scanner, file string) ([]mapping, error) {
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	var out []mapping
	cur := -1 // index in out of the mapping whose fields follow, or -1
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) == 0 {
			continue
		}
		if strings.HasSuffix(fs[0], ":") { // a field of the mapping above
			if cur >= 0 && fs[0] == "Anonymous:" && len(fs) >= 2 {
				kb, err := strconv.ParseInt(fs[1], 10, 64)
				if err != nil {
					kb = 1 // unreadable: treat the mapping as holding private pages
				}
				out[cur].anonKB = kb
			}
			continue
		}
		cur = -1
		if len(fs) < 6 || fs[5] != file {
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
		// Until its Anonymous line is read, a mapping counts as holding private pages.
		out = append(out, mapping{lo: uintptr(a), hi: uintptr(b), perms: fs[1], off: off, anonKB: -1})
		cur = len(out) - 1
	}
	return out, s.Err()
}

// ResidentMB is the process's VmRSS in MiB (0 when /proc/self/status cannot be read).
func ResidentMB() int64 { return statusKB("VmRSS:") >> 10 }

// FileResidentMB is the process's file-backed resident memory (RssFile) in MiB: in a Go
// program, nearly all of it is its executable's pages.
func FileResidentMB() int64 { return statusKB("RssFile:") >> 10 }

// statusKB is a kB field of /proc/self/status (0 when it cannot be read).
func statusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				kb, _ := strconv.ParseInt(fs[0], 10, 64)
				return kb
			}
		}
	}
	return 0
}
