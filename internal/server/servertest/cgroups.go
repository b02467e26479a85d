package servertest

import (
	"fmt"
	"os"
	"path"

	"kubeos.dev/kube/internal/agent/cgroups"
)

// AgentCgroupRoot is this test process's own cgroup root ("/kube-test-<pid>") for the
// kubepods hierarchies of the agents it starts (server.Options.AgentCgroupRoot, kube agent's
// --cgroup-root): agents of packages running in parallel must not share /kubepods, where
// each would size the QoS cgroups for its own pods and could remove another's pod cgroups.
// RemoveAgentCgroupRoot removes it once those agents have stopped.
func AgentCgroupRoot() string { return fmt.Sprintf("/kube-test-%d", os.Getpid()) }

// NodeCgroupRoot is the cgroup root of another node's agent started by this test process
// (a `kube agent` process beside the in-process agent): under AgentCgroupRoot, so that
// RemoveAgentCgroupRoot removes it too, but not AgentCgroupRoot itself. Two agents sharing
// one kubepods hierarchy each size its QoS cgroups for their own pods only and take the
// other's pod cgroups for orphans of their own.
func NodeCgroupRoot(node string) string { return path.Join(AgentCgroupRoot(), node) }

// RemoveAgentCgroupRoot removes AgentCgroupRoot's hierarchy (cgroups still holding
// processes stay, and are named in the error).
func RemoveAgentCgroupRoot() error {
	h, err := cgroups.New("", AgentCgroupRoot())
	if err != nil {
		return err
	}
	return h.Remove()
}
