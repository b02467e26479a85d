package slot

import (
	"fmt"
	"net"
	"sync"
)

// Ports of a slot: PortsPerSlot consecutive TCP ports from PortBase + N()·PortsPerSlot, all
// below the kernel's ephemeral range (32768–60999 by default) and the Service NodePort range
// (30000–32767). A port picked by listening on :0 and closing is in the ephemeral range, where
// any outgoing connection of a loaded machine may take it before the test binds it again (a
// gateway of test/application once lost its port that way in CI); no outgoing connection
// takes these, and no other test process holds this slot.
const (
	PortBase     = 20000
	PortsPerSlot = 80
)

var (
	portMu   sync.Mutex
	nextPort int
)

// FreePort returns one of this process's slot ports that nothing listens on now, a
// different one on each call until all PortsPerSlot were handed out (then they are handed
// out again, skipping those in use).
func FreePort() (int, error) {
	n, err := N()
	if err != nil {
		return 0, err
	}
	portMu.Lock()
	defer portMu.Unlock()
	for range PortsPerSlot {
		p := PortBase + n*PortsPerSlot + nextPort%PortsPerSlot
		nextPort++
		if portFree(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("slot: all %d ports of slot %d are in use", PortsPerSlot, n)
}

// portFree says whether nothing listens on p, on the loopback address or any address.
func portFree(p int) bool {
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf(":%d", p)} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
