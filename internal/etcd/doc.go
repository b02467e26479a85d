// Package etcd runs an etcd member inside the Kube process (go.etcd.io/etcd/server/v3/embed)
// and builds clients for an embedded member or an external cluster.
//
// Kube never replicates state itself: etcd is the distributed engine. A single `kube server`
// runs one embedded member in its data directory, with no TCP port at all: no peer listener,
// and for clients only a unix socket in the 0700 data directory, since etcd would hand every
// object to whoever reaches it. `kube etcd` runs one member of a cluster on its own, on the
// URLs it is given (plain http: the operator protects them), so three of them form a cluster
// on one machine; several `kube server` processes then share it through --etcd-servers.
//
// The embedded member's own server talks to it in-process (Member.Client: etcd's v3client,
// no gRPC and no socket); tests and tools of the same user reach it through its socket, and
// any process reaches an external cluster over the network (NewClient).
//
// Usage:
//
//	m, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: dir})
//	defer m.Close()
//	cli := m.Client() // in-process; or, from elsewhere:
//	cli, err := etcd.NewClient(etcd.ClientOptions{Endpoints: m.ClientURLs()})
package etcd
