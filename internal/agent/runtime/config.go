package runtime

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Layout is where one agent's containerd keeps everything, all under Dir.
type Layout struct {
	// Dir is the runtime's directory (the agent's data dir + "/containerd").
	Dir string
}

// Socket is containerd's gRPC socket.
func (l Layout) Socket() string { return filepath.Join(l.Dir, "containerd.sock") }

// Endpoint is the CRI endpoint of Socket.
func (l Layout) Endpoint() string { return "unix://" + l.Socket() }

// ConfigFile is the containerd configuration the agent writes.
func (l Layout) ConfigFile() string { return filepath.Join(l.Dir, "config.toml") }

// PidFile holds the pid of the supervised containerd.
func (l Layout) PidFile() string { return filepath.Join(l.Dir, "containerd.pid") }

// LogFile is containerd's log.
func (l Layout) LogFile() string { return filepath.Join(l.Dir, "containerd.log") }

// Root, State and RuncRoot are containerd's and runc's directories.
func (l Layout) Root() string     { return filepath.Join(l.Dir, "root") }
func (l Layout) State() string    { return filepath.Join(l.Dir, "state") }
func (l Layout) RuncRoot() string { return filepath.Join(l.Dir, "runc") }

// CNIConfDir is the CNI configuration directory containerd's CRI plugin reads.
func (l Layout) CNIConfDir() string { return filepath.Join(l.Dir, "cni", "net.d") }

// ConfigOptions are the choices in a containerd configuration.
type ConfigOptions struct {
	// SandboxImage is the pod sandbox (pause) image reference.
	SandboxImage string
	// CNIBinDir holds the CNI plugins (Debian: /usr/lib/cni).
	CNIBinDir string
	// SystemdCgroup selects the systemd cgroup driver (false: cgroupfs).
	SystemdCgroup bool
}

// Config renders containerd's configuration (version 2) for l. Pure.
func Config(l Layout, o ConfigOptions) string {
	var b strings.Builder
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	fmt.Fprintf(&b, "version = 2\nroot = %s\nstate = %s\n", q(l.Root()), q(l.State()))
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing"]` + "\n")
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n", q(l.Socket()))
	fmt.Fprintf(&b, "[ttrpc]\n  address = %s\n", q(l.Socket()+".ttrpc"))
	fmt.Fprintf(&b, "[debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n")
	fmt.Fprintf(&b, "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %s\n", q(filepath.Join(l.Dir, "opt")))
	b.WriteString("[plugins.\"io.containerd.grpc.v1.cri\"]\n")
	fmt.Fprintf(&b, "  sandbox_image = %s\n", q(o.SandboxImage))
	b.WriteString("  stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"0\"\n")
	b.WriteString("  netns_mounts_under_state_dir = true\n  restrict_oom_score_adj = true\n  enable_selinux = false\n")
	b.WriteString("  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n    snapshotter = \"overlayfs\"\n    default_runtime_name = \"runc\"\n")
	b.WriteString("    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n      runtime_type = \"io.containerd.runc.v2\"\n")
	b.WriteString("      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n")
	fmt.Fprintf(&b, "        SystemdCgroup = %t\n        Root = %s\n", o.SystemdCgroup, q(l.RuncRoot()))
	b.WriteString("  [plugins.\"io.containerd.grpc.v1.cri\".cni]\n")
	fmt.Fprintf(&b, "    bin_dir = %s\n    conf_dir = %s\n    max_conf_num = 1\n", q(o.CNIBinDir), q(l.CNIConfDir()))
	return b.String()
}
