// Package netharness is the shared fixture of the Service-networking test packages
// (test/services-net, test/services-net/nonft, test/netpol): one in-process `kube server --agent` (its own
// containerd, bridge, pod CIDR, Service CIDR and nftables table), optionally a SECOND
// `kube agent` process in its own network namespace joined to the host by a veth pair, so
// that traffic between the two nodes is real routed traffic, and a busybox image imported
// from /bin/busybox (this machine has no registry).
//
// Use it from TestMain:
//
//	var c *netharness.Cluster
//	func TestMain(m *testing.M) {
//		os.Exit(netharness.Run(m, netharness.Options{Name: "svc", SecondNode: true}, &c))
//	}
//
// Everything machine-wide is derived from the test process's pid and removed when Run
// returns, pass or fail: sandboxes, both containerds, mounts, bridges, the network
// namespace and veth, the agents' routes (internal/agent/routes.Cleanup), the nftables table (internal/agent/proxy.Cleanup) and the
// host's ip_forward (restored), the agents' cgroup roots (servertest.AgentCgroupRoot, node B's
// servertest.NodeCgroupRoot under it). Addresses (N is the process's
// test slot, internal/server/servertest/slot: unique on the machine while it runs):
//
//	cluster (pod) CIDR  10.236.(2N).0/23 — node IPAM gives each node one /24 of it
//	Service CIDR        10.237.(2N).0/23 (the cluster DNS address is its tenth)
//	veth                10.238.N.1/30 on the host (the server is reachable there),
//	                    10.238.N.2/30 in the namespace (node B's InternalIP)
//	names               bridge nh<pid>a / nh<pid>b, netns nh<pid>, veth nh<pid>h / nh<pid>n,
//	                    nftables table kt<pid> (the same name in each node's namespace)
//
// The routes between the two nodes' pod CIDRs are the agents' own (internal/agent/routes:
// each routes the other's pod CIDR via the way it reaches the other's InternalIP); the
// harness adds none. Pods get routes to the cluster CIDR, the Service CIDR and the nodes' addresses from the
// harness (podroutes.go) while the agent's CNI configuration gives them none beyond their
// own pod CIDR. busybox's wget -T crashes this busybox build: bound it with `timeout`.
//
// The API (Cluster, Node, Options and the helpers) is kept stable for the other packages.
package netharness
