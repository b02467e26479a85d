package runtime

import (
	"bytes"
	"testing"
)

// TestShimOf: only a containerd shim whose -address lies under the directory is one of its.
func TestShimOf(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    bool
	}{
		{"/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc -address /tmp/t1/agent-a/containerd/containerd.sock", true},
		{"/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc -address /tmp/t10/agent-a/containerd/containerd.sock", false},
		{"/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc -address /run/containerd/containerd.sock", false},
		{"/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc", false},
		{"/usr/bin/containerd-shim-runc-v2 -address", false},
		{"/usr/bin/containerd --config /tmp/t1/agent-a/containerd/config.toml -address /tmp/t1/x", false},
		{"sleep -address /tmp/t1/agent-a", false},
		{"", false},
	} {
		argv := bytes.Split([]byte(c.cmdline), []byte(" "))
		if got := shimOf(argv, "/tmp/t1/"); got != c.want {
			t.Errorf("%q: %v, want %v", c.cmdline, got, c.want)
		}
	}
}
