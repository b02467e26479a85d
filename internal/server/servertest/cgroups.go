package servertest

import (
	"fmt"
	"os"

	"kubeos.dev/kube/internal/agent/cgroups"
)

// AgentCgroupRoot is this test process's own cgroup root ("/kube-test-<pid>") for the
// kubepods hierarchies of the agents it starts (server.Options.AgentCgroupRoot, kube agent's
// --cgroup-root): agents of packages running in parallel must not share /kubepods, where
// each would size the QoS cgroups for its own pods and could remove another's pod cgroups.
// RemoveAgentCgroupRoot removes it once those agents have stopped.
func AgentCgroupRoot() string { return fmt.Sprintf("/kube-test-%d", os.Getpid()) }

// RemoveAgentCgroupRoot removes AgentCgroupRoot's hierarchy (cgroups still holding
// processes stay, and are named in the error).
func RemoveAgentCgroupRoot() error {
	h, err := cgroups.New("", AgentCgroupRoot())
	if err != nil {
		return err
	}
	return h.Remove()
}
