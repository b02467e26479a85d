package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routeProtocol marks the routes the proxy owns (rtnetlink protocol number 0x4b, "K").
const routeProtocol = netlink.RouteProtocol(0x4b)

// unreachableMetric keeps the Service CIDR's unreachable route below any real one.
const unreachableMetric = 4000

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// ensureUnreachable installs `unreachable <serviceCIDR> metric 4000`.
func ensureUnreachable(p netip.Prefix) error {
	r := &netlink.Route{Dst: ipNet(p), Type: unix.RTN_UNREACHABLE, Priority: unreachableMetric, Protocol: routeProtocol}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("proxy: unreachable route for %s: %w", p, err)
	}
	return nil
}

// routes keeps one /32 route on lo per programmed ClusterIP, so the node's own processes
// can connect to it despite the unreachable route (nat-output's DNAT reroutes).
type routes struct {
	lo   int
	have map[netip.Addr]bool
}

func newRoutes(serviceCIDR netip.Prefix) (*routes, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("proxy: lo: %w", err)
	}
	r := &routes{lo: lo.Attrs().Index, have: map[netip.Addr]bool{}}
	// A previous run's routes are known, so that sync removes the stale ones.
	existing, err := netlink.RouteListFiltered(unix.AF_INET, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, fmt.Errorf("proxy: list routes: %w", err)
	}
	for _, rt := range existing {
		if rt.Dst == nil || rt.Type != unix.RTN_UNICAST {
			continue
		}
		if a, ok := netip.AddrFromSlice(rt.Dst.IP.To4()); ok && serviceCIDR.Contains(a) {
			ones, _ := rt.Dst.Mask.Size()
			if ones == 32 {
				r.have[a] = true
			}
		}
	}
	return r, nil
}

func (r *routes) route(a netip.Addr) *netlink.Route {
	return &netlink.Route{Dst: ipNet(netip.PrefixFrom(a, 32)), LinkIndex: r.lo, Scope: netlink.SCOPE_LINK, Protocol: routeProtocol}
}

// sync makes the routes those of want; it returns the first error and keeps going.
func (r *routes) sync(want map[netip.Addr]bool) error {
	var errs []error
	for a := range want {
		if r.have[a] {
			continue
		}
		if err := netlink.RouteReplace(r.route(a)); err != nil {
			errs = append(errs, fmt.Errorf("proxy: route %s: %w", a, err))
			continue
		}
		r.have[a] = true
	}
	for a := range r.have {
		if want[a] {
			continue
		}
		if err := netlink.RouteDel(r.route(a)); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("proxy: delete route %s: %w", a, err))
			continue
		}
		delete(r.have, a)
	}
	return errors.Join(errs...)
}

// deleteRoutes removes the unreachable route of p and every proxy route inside p.
func deleteRoutes(p netip.Prefix) error {
	all, err := netlink.RouteListFiltered(unix.AF_INET, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("proxy: list routes: %w", err)
	}
	for _, rt := range all {
		if rt.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(rt.Dst.IP.To4())
		if !ok || !p.Contains(a) {
			continue
		}
		_ = netlink.RouteDel(&rt)
	}
	return nil
}

// setSysctls turns on forwarding and makes bridged traffic pass netfilter (br_netfilter).
func setSysctls() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("proxy: net.ipv4.ip_forward: %w", err)
	}
	const brnf = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if _, err := os.Stat(brnf); err != nil {
		return fmt.Errorf("proxy: br_netfilter is not loaded (%s missing): hairpin and same-node Service traffic need it", brnf)
	}
	if err := os.WriteFile(brnf, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("proxy: net.bridge.bridge-nf-call-iptables: %w", err)
	}
	return nil
}
