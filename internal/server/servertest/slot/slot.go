// Package slot hands each test process a number no other test process on the machine holds
// at the same time, for the machine-wide names and addresses tests derive from it (pod and
// Service CIDRs, veth addresses). A pid modulo a small number is not unique: go test runs
// packages in parallel, and two of them whose pids agree modulo N then program the same
// routes.
//
// The slot is an exclusive flock on /run/kube-test-slots/<n>; the kernel drops it when the
// process ends, however it ends (kill -9 included), so nothing is left to clean up.
package slot

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Count is the number of slots: N() is in [0, Count). Address plans may use 2·N() in an octet.
const Count = 120

// Dir holds the lock files.
const Dir = "/run/kube-test-slots"

var (
	once sync.Once
	n    int
	held *os.File // kept open (and so locked) for the life of the process
	err  error
)

// N returns this process's slot, the same on every call. It starts from the pid's residue,
// so processes seldom contend for the same lock, and fails only when all Count are held.
func N() (int, error) {
	once.Do(func() { n, held, err = take(Dir, os.Getpid()) })
	return n, err
}

// take locks the first free slot in dir, starting at start modulo Count.
func take(dir string, start int) (int, *os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	for i := 0; i < Count; i++ {
		k := (start + i) % Count
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(k)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return k, f, nil
		}
		f.Close()
	}
	return 0, nil, fmt.Errorf("slot: all %d test slots in %s are held", Count, dir)
}

// Must is N for test setup code that has no error path: it panics when no slot is free.
func Must() int {
	k, err := N()
	if err != nil {
		panic(err)
	}
	return k
}
