package netharness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	agentruntime "kubeos.dev/kube/internal/agent/runtime"
)

// RemoveSandboxes stops and removes every sandbox (and so every container) of the agent
// whose data directory is dataDir through its containerd: the running one, or one started
// here (in network namespace netns, "" for the host's) from the agent's configuration when
// the agent stopped it; then it kills any shim left serving that containerd. Called once no
// agent runs there, so nothing makes new sandboxes meanwhile (test/agent, test/gateway,
// test/application and test/lifecycle use it too).
func RemoveSandboxes(dataDir, netns string) {
	// Last: a shim containerd lost track of would outlive the test.
	defer agentruntime.KillShims(dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	layout := agentruntime.Layout{Dir: filepath.Join(dataDir, "containerd")}
	if agentruntime.Ping(ctx, layout.Endpoint()) != nil {
		if _, err := os.Stat(layout.ConfigFile()); err != nil {
			return
		}
		args := []string{"containerd", "--config", layout.ConfigFile()}
		if netns != "" {
			args = append([]string{"nsenter", "--net=/var/run/netns/" + netns, "--"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9")
		if err := cmd.Start(); err != nil {
			return
		}
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
		if agentruntime.WaitReady(ctx, layout.Endpoint(), 30*time.Second) != nil {
			return
		}
	}
	cri, err := agentruntime.Connect(ctx, layout.Endpoint())
	if err != nil {
		return
	}
	sbs, _ := cri.Runtime.ListPodSandbox(ctx, nil)
	for _, sb := range sbs {
		_ = cri.Runtime.StopPodSandbox(ctx, sb.Id)
		_ = cri.Runtime.RemovePodSandbox(ctx, sb.Id)
	}
}

// unmountUnder lazily unmounts whatever is still mounted below root.
func unmountUnder(root string) {
	b, _ := os.ReadFile("/proc/mounts")
	var mounts []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], root+"/") {
			mounts = append(mounts, f[1])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = exec.Command("umount", "-l", mounts[i]).Run()
	}
}
