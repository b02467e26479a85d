// Package runtime is the node agent's container runtime: it writes a containerd
// configuration into the agent's data directory, starts and supervises that containerd
// (restarting it when it dies, stopping it when the agent stops), and connects to it — or
// to any CRI v1 endpoint given instead — through k8s.io/cri-client.
//
// The configuration carries this machine's traps (see ../shared/peers/run-kubelet.sh):
// cgroupfs driver (containerd 1.6 has no RuntimeConfig RPC, so the agent and containerd
// must agree), restrict_oom_score_adj (root may lack CAP_SYS_RESOURCE), its own root,
// state, socket, runc root and CNI directories so that several agents share one machine,
// and an HTTP(S) proxy for image pulls when one is asked for (tests point it at a closed
// loopback port so no pull leaves the machine).
//
// A containerd left running by an agent that was killed (kill -9) is adopted on the next
// start from its pid file, so running containers are never disturbed.
package runtime
