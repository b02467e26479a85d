package localuser

import (
	"os"
	"testing"
)

// AssertMode fails t unless path's type and permission bits are want (for instance
// os.ModeSocket|0o600 for a socket only its owner may connect to).
func AssertMode(t testing.TB, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModeType | os.ModePerm); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}
