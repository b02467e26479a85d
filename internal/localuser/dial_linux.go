//go:build linux

package localuser

import (
	"net"
	"os"
	"runtime"
	"syscall"
)

// DialAsNobody connects to the unix socket at path with the file-system identity of user and
// group 65534 (nobody), as another local user would. It can only when the test runs as root
// (tried false otherwise). setfsuid changes one thread, which the goroutine never unlocks, so
// the thread ends with it; moving fsuid off 0 also drops the capabilities that would let root
// past file modes.
func DialAsNobody(path string) (tried bool, err error) {
	if os.Geteuid() != 0 {
		return false, nil
	}
	type result struct {
		tried bool
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		syscall.Syscall(syscall.SYS_SETFSGID, 65534, 0, 0)
		syscall.Syscall(syscall.SYS_SETFSUID, 65534, 0, 0)
		// An invalid id changes nothing and returns the current one.
		if cur, _, _ := syscall.Syscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0); cur != 65534 {
			ch <- result{}
			return
		}
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		ch <- result{true, err}
	}()
	r := <-ch
	return r.tried, r.err
}
