package routes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Protocol marks the routes this package owns (rtnetlink protocol 0x4c, "L"; the Service
// proxy's /32 routes use 0x4b).
const Protocol = netlink.RouteProtocol(0x4c)

// kernel reads and writes the routes over netlink, in the namespace of its handle.
type kernel struct {
	h       *netlink.Handle
	cluster netip.Prefix
}

func newKernel(h *netlink.Handle, cluster netip.Prefix) (*kernel, error) {
	if h == nil {
		var err error
		if h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return nil, fmt.Errorf("routes: netlink: %w", err)
		}
	}
	return &kernel{h: h, cluster: cluster}, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP.To4())
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}

// owned are the routes of Protocol in the main table inside the cluster CIDR.
func (k *kernel) owned() (map[netip.Prefix]Route, error) {
	rs, err := k.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Protocol: Protocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("routes: list: %w", err)
	}
	out := map[netip.Prefix]Route{}
	for _, r := range rs {
		dst, ok := prefixOf(r.Dst)
		if !ok || (k.cluster.IsValid() && !k.cluster.Overlaps(dst)) {
			continue
		}
		gw, _ := netip.AddrFromSlice(r.Gw.To4())
		out[dst] = Route{Dst: dst, Gateway: gw, Link: r.LinkIndex}
	}
	return out, nil
}

// errNoPath says a node's address is not reached through an interface (it is local, or
// unroutable).
var errNoPath = errors.New("not reached through an interface")

// nexthop is how this node reaches ip: the link, and the gateway (ip itself when on-link).
func (k *kernel) nexthop(ip netip.Addr) (link int, gw netip.Addr, err error) {
	rs, err := k.h.RouteGet(ip.AsSlice())
	if err != nil {
		return 0, netip.Addr{}, fmt.Errorf("routes: route to %s: %w", ip, err)
	}
	if len(rs) == 0 {
		return 0, netip.Addr{}, fmt.Errorf("routes: route to %s: %w", ip, errNoPath)
	}
	r := rs[0]
	if r.Type == unix.RTN_LOCAL || r.LinkIndex == 0 {
		return 0, netip.Addr{}, fmt.Errorf("routes: %s: %w", ip, errNoPath)
	}
	if l, err := k.h.LinkByIndex(r.LinkIndex); err == nil && l.Attrs().Flags&net.FlagLoopback != 0 {
		return 0, netip.Addr{}, fmt.Errorf("routes: %s is this node's: %w", ip, errNoPath)
	}
	gw = ip
	if g, ok := netip.AddrFromSlice(r.Gw.To4()); ok && g.IsValid() && !g.IsUnspecified() {
		gw = g
	}
	return r.LinkIndex, gw, nil
}

func (k *kernel) route(r Route) *netlink.Route {
	return &netlink.Route{Dst: ipNet(r.Dst), Gw: r.Gateway.AsSlice(), LinkIndex: r.Link, Protocol: Protocol,
		Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_UNIVERSE}
}

func (k *kernel) replace(r Route) error {
	if err := k.h.RouteReplace(k.route(r)); err != nil {
		return fmt.Errorf("routes: %s via %s: %w", r.Dst, r.Gateway, err)
	}
	return nil
}

func (k *kernel) remove(dst netip.Prefix) error {
	err := k.h.RouteDel(&netlink.Route{Dst: ipNet(dst), Protocol: Protocol, Table: unix.RT_TABLE_MAIN})
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("routes: delete %s: %w", dst, err)
	}
	return nil
}
