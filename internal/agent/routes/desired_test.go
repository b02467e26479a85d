package routes

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, ip string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(cidrs) == 1 {
		n.Spec.PodCIDR = cidrs[0]
	} else if len(cidrs) > 1 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidrs[0], cidrs
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

func TestPeers(t *testing.T) {
	deleting := node("d", "192.0.2.4", "10.1.4.0/24")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	p := func(n, cidr, ip string) Peer {
		return Peer{Node: n, PodCIDR: netip.MustParsePrefix(cidr), NodeIP: netip.MustParseAddr(ip)}
	}
	for _, tc := range []struct {
		name      string
		nodes     []*corev1.Node
		cluster   string
		want      []Peer
		conflicts int
	}{
		{"self is skipped", []*corev1.Node{node("me", "192.0.2.1", "10.1.1.0/24"), node("b", "192.0.2.2", "10.1.2.0/24")}, "",
			[]Peer{p("b", "10.1.2.0/24", "192.0.2.2")}, 0},
		{"no pod CIDR or no InternalIP: nothing", []*corev1.Node{node("b", "192.0.2.2"), node("c", "", "10.1.3.0/24")}, "", nil, 0},
		{"deleting node: nothing", []*corev1.Node{deleting}, "", nil, 0},
		{"dual stack: IPv4 only", []*corev1.Node{node("b", "192.0.2.2", "10.1.2.0/24", "fd00:1::/64")}, "",
			[]Peer{p("b", "10.1.2.0/24", "192.0.2.2")}, 0},
		{"IPv6 InternalIP first, IPv4 used", []*corev1.Node{func() *corev1.Node {
			n := node("b", "192.0.2.2", "10.1.2.0/24")
			n.Status.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fd00::2"}}, n.Status.Addresses...)
			return n
		}()}, "", []Peer{p("b", "10.1.2.0/24", "192.0.2.2")}, 0},
		{"outside the cluster CIDR: nothing", []*corev1.Node{node("b", "192.0.2.2", "10.9.2.0/24"), node("c", "192.0.2.3", "10.1.3.0/24")}, "10.1.0.0/16",
			[]Peer{p("c", "10.1.3.0/24", "192.0.2.3")}, 0},
		{"unmasked CIDR is masked", []*corev1.Node{node("b", "192.0.2.2", "10.1.2.7/24")}, "",
			[]Peer{p("b", "10.1.2.0/24", "192.0.2.2")}, 0},
		{"bad CIDR ignored", []*corev1.Node{node("b", "192.0.2.2", "nonsense")}, "", nil, 0},
		{"claimed twice: first by name", []*corev1.Node{node("c", "192.0.2.3", "10.1.2.0/24"), node("b", "192.0.2.2", "10.1.2.0/24")}, "",
			[]Peer{p("b", "10.1.2.0/24", "192.0.2.2")}, 1},
		{"sorted by CIDR", []*corev1.Node{node("a", "192.0.2.9", "10.1.9.0/24"), node("z", "192.0.2.3", "10.1.3.0/24")}, "",
			[]Peer{p("z", "10.1.3.0/24", "192.0.2.3"), p("a", "10.1.9.0/24", "192.0.2.9")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cluster netip.Prefix
			if tc.cluster != "" {
				cluster = netip.MustParsePrefix(tc.cluster)
			}
			got, conflicts := Peers("me", tc.nodes, cluster)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("peers %v, want %v", got, tc.want)
			}
			if len(conflicts) != tc.conflicts {
				t.Errorf("conflicts %v, want %d", conflicts, tc.conflicts)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	r := func(dst, gw string, link int) Route {
		return Route{Dst: netip.MustParsePrefix(dst), Gateway: netip.MustParseAddr(gw), Link: link}
	}
	m := func(rs ...Route) map[netip.Prefix]Route {
		out := map[netip.Prefix]Route{}
		for _, x := range rs {
			out[x.Dst] = x
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		have, want map[netip.Prefix]Route
		write      []Route
		remove     []netip.Prefix
	}{
		{"nothing", m(), m(), nil, nil},
		{"same: nothing to do (restart)", m(r("10.1.2.0/24", "192.0.2.2", 3)), m(r("10.1.2.0/24", "192.0.2.2", 3)), nil, nil},
		{"new", m(), m(r("10.1.2.0/24", "192.0.2.2", 3)), []Route{r("10.1.2.0/24", "192.0.2.2", 3)}, nil},
		{"node moved", m(r("10.1.2.0/24", "192.0.2.2", 3)), m(r("10.1.2.0/24", "192.0.2.7", 3)), []Route{r("10.1.2.0/24", "192.0.2.7", 3)}, nil},
		{"link changed", m(r("10.1.2.0/24", "192.0.2.2", 3)), m(r("10.1.2.0/24", "192.0.2.2", 4)), []Route{r("10.1.2.0/24", "192.0.2.2", 4)}, nil},
		{"node gone", m(r("10.1.2.0/24", "192.0.2.2", 3), r("10.1.3.0/24", "192.0.2.3", 3)), m(r("10.1.3.0/24", "192.0.2.3", 3)),
			nil, []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, rm := Plan(tc.have, tc.want)
			if !reflect.DeepEqual(w, tc.write) || !reflect.DeepEqual(rm, tc.remove) {
				t.Errorf("write %v remove %v, want %v %v", w, rm, tc.write, tc.remove)
			}
		})
	}
}
