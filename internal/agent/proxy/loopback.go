package proxy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	k8sproxy "k8s.io/kubernetes/pkg/proxy"
)

// An API server on loopback only (Options.APIServer). The kubernetes Service lists the
// host's public address, as upstream (an Endpoints address may not be loopback), but a
// `kube server` on its default bind address listens on 127.0.0.1 only, so a pod's
// connection to the Service would be refused there. The proxy DNATs that Service's
// ClusterIP port to the loopback address instead (buildPort), which the kernel routes
// only when the packet came in on an interface with route_localnet on: the pods' bridge
// gets it, as kube-proxy's iptables mode turns it on for NodePorts on localhost. A kernel
// path, nothing in userspace, and no listener opened on the network.
//
// route_localnet alone would let a pod reach whatever listens on the node's loopback
// (etcd's client port, every 127.0.0.1 service: CVE-2020-8558), so the fixed chain
// guardChain (filter, input) drops a packet that came in on the bridge for 127.0.0.0/8
// unless conntrack says it was DNATed (the proxy's redirect, or another rule's): kube-
// proxy's KUBE-FIREWALL rule for the same hole. The guard rule is in place before
// route_localnet is turned on, and names the bridge, so Cleanup knows where to turn it
// off again from the table alone.

// guardChain is the fixed chain of the loopback guard.
const guardChain = "loopback-guard"

// ctStatusDNAT is conntrack's IPS_DST_NAT status bit (linux/netfilter/nf_conntrack_common.h).
const ctStatusDNAT uint32 = 1 << 5

// isAPIServerPort says the Service port is the one whose ClusterIP traffic goes to
// Options.APIServer: default/kubernetes, port https (TCP).
func isAPIServerPort(name k8sproxy.ServicePortName, svc k8sproxy.ServicePort) bool {
	return name.Namespace == "default" && name.Name == "kubernetes" && name.Port == "https" &&
		svc.Protocol() == v1.ProtocolTCP
}

// routeLocalnet is the bridge's net.ipv4.conf.<bridge>.route_localnet.
func routeLocalnet(bridge string) string {
	return "/proc/sys/net/ipv4/conf/" + bridge + "/route_localnet"
}

// setRouteLocalnet sets the bridge's route_localnet; a bridge that does not exist (yet: the
// CNI plugin makes it with the node's first pod) is no error, and false.
func setRouteLocalnet(bridge string, on bool) (bool, error) {
	want := "0"
	if on {
		want = "1"
	}
	path := routeLocalnet(bridge)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err == nil && strings.TrimSpace(string(b)) == want {
		return true, nil
	}
	if err := os.WriteFile(path, []byte(want+"\n"), 0o644); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("proxy: net.ipv4.conf.%s.route_localnet: %w", bridge, err)
	}
	return true, nil
}

// ifname is an interface name as the kernel compares it (IFNAMSIZ bytes, NUL-padded).
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// guardExprs: iifname <bridge> ip daddr 127.0.0.0/8 ct status & dnat == 0 drop.
func guardExprs(bridge string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: ifname(bridge)},
		ipDaddr(reg1),
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{127, 0, 0, 0}},
		&expr.Ct{Register: reg1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ctStatusDNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// guardedBridge is the bridge the table's guard rule names ("" when the table has no
// guard): the bridge whose route_localnet a run of the proxy turned on.
func guardedBridge(c *nftables.Conn, table *nftables.Table) string {
	rules, err := c.GetRules(table, &nftables.Chain{Name: guardChain, Table: table})
	if err != nil {
		return ""
	}
	for _, r := range rules {
		for i, e := range r.Exprs {
			m, ok := e.(*expr.Meta)
			if !ok || m.Key != expr.MetaKeyIIFNAME || i+1 >= len(r.Exprs) {
				continue
			}
			if cmp, ok := r.Exprs[i+1].(*expr.Cmp); ok {
				return strings.TrimRight(string(cmp.Data), "\x00")
			}
		}
	}
	return ""
}

// hasChain says whether the table holds the chain.
func hasChain(c *nftables.Conn, table *nftables.Table, name string) (bool, error) {
	chains, err := c.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return false, err
	}
	for _, ch := range chains {
		if ch.Table.Name == table.Name && ch.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// watchBridge turns route_localnet on whenever the bridge appears (the CNI plugin makes it
// when the node's first pod starts, or again after it was deleted), until ctx ends.
// Without netlink notifications, the syncs (ensureLocalnet) still turn it on.
func watchBridge(ctx context.Context, bridge string, log *slog.Logger) {
	updates := make(chan netlink.LinkUpdate, 16)
	done := make(chan struct{})
	defer close(done)
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) { log.Warn("link notifications", "err", err) },
	})
	if err != nil {
		log.Warn("no link notifications: route_localnet of the pod bridge is checked at each sync only", "bridge", bridge, "err", err)
		return
	}
	// The bridge may have appeared between New and the subscription.
	ensureLocalnet(bridge, log)
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			if u.Header.Type == unix.RTM_NEWLINK && u.Link != nil && u.Link.Attrs().Name == bridge {
				ensureLocalnet(bridge, log)
			}
		}
	}
}

// ensureLocalnet turns the bridge's route_localnet on if the bridge exists.
func ensureLocalnet(bridge string, log *slog.Logger) {
	if _, err := setRouteLocalnet(bridge, true); err != nil {
		log.Warn("pods cannot reach the loopback API server", "err", err)
	}
}
