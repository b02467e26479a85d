package slot

import (
	"fmt"
	"net"
	"testing"
)

// TestTakeSkipsHeld: a slot held by an open lock is skipped; closing the file frees it.
func TestTakeSkipsHeld(t *testing.T) {
	dir := t.TempDir()
	a, fa, err := take(dir, 7)
	if err != nil || a != 7 {
		t.Fatalf("first take = %d, %v; want 7", a, err)
	}
	b, fb, err := take(dir, 7)
	if err != nil || b != 8 {
		t.Fatalf("second take = %d, %v; want 8 (7 is held)", b, err)
	}
	c, fc, err := take(dir, Count-1)
	if err != nil || c != Count-1 {
		t.Fatalf("take from the last = %d, %v", c, err)
	}
	fc.Close()
	fa.Close()
	d, fd, err := take(dir, 7)
	if err != nil || d != 7 {
		t.Fatalf("take after release = %d, %v; want 7", d, err)
	}
	fb.Close()
	fd.Close()
}

// TestFreePort: the ports are the slot's, below the ephemeral range, distinct, and one in
// use is skipped.
func TestFreePort(t *testing.T) {
	n, err := N()
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := PortBase+n*PortsPerSlot, PortBase+(n+1)*PortsPerSlot
	if PortBase+Count*PortsPerSlot > 30000 {
		t.Fatalf("slot ports reach %d, into the NodePort and ephemeral ranges", PortBase+Count*PortsPerSlot)
	}
	a, err := FreePort()
	if err != nil || a < lo || a >= hi {
		t.Fatalf("FreePort = %d, %v; want in [%d, %d)", a, err, lo, hi)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", a+1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := FreePort()
	if err != nil || b != a+2 {
		t.Fatalf("FreePort after %d with %d in use = %d, %v; want %d", a, a+1, b, err, a+2)
	}
}
