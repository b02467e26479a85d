package slot

import "testing"

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
