package runtime

import (
	"slices"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	l := Layout{Dir: "/d/containerd"}
	c := Config(l, ConfigOptions{SandboxImage: "kube.local/pause:1", CNIBinDir: "/usr/lib/cni"})
	for _, want := range []string{
		`root = "/d/containerd/root"`, `state = "/d/containerd/state"`, `address = "/d/containerd/containerd.sock"`,
		`restrict_oom_score_adj = true`, `SystemdCgroup = false`, `Root = "/d/containerd/runc"`,
		`conf_dir = "/d/containerd/cni/net.d"`, `bin_dir = "/usr/lib/cni"`, `sandbox_image = "kube.local/pause:1"`,
		`netns_mounts_under_state_dir = true`, `stream_server_address = "127.0.0.1"`,
	} {
		if !strings.Contains(c, want) {
			t.Errorf("config lacks %s:\n%s", want, c)
		}
	}
}

func TestContainerdEnv(t *testing.T) {
	env := containerdEnv([]string{"PATH=/bin", "http_proxy=http://x", "HTTPS_PROXY=http://y"}, "http://127.0.0.1:9")
	want := []string{"PATH=/bin", "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY="}
	if !slices.Equal(env, want) {
		t.Errorf("%v, want %v", env, want)
	}
	if got := containerdEnv([]string{"http_proxy=x"}, ""); !slices.Equal(got, []string{"http_proxy=x"}) {
		t.Errorf("no proxy asked, env changed: %v", got)
	}
}
