package servicealloc

import (
	"errors"
	"fmt"
	"net"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	netutils "k8s.io/utils/net"
)

// DefaultServiceClusterIPRange is the --service-cluster-ip-range Kube uses when none is
// given. kube-apiserver's built-in default, 10.0.0.0/24, holds 254 Services; Kube takes
// kubeadm's default instead: a /12 (about a million addresses) that real clusters do not
// outgrow, in a private block that seldom collides with node or pod networks.
const DefaultServiceClusterIPRange = "10.96.0.0/12"

// DefaultServiceNodePortRange is the --service-node-port-range default, as upstream.
const DefaultServiceNodePortRange = "30000-32767"

// Ranges are the parsed --service-cluster-ip-range and --service-node-port-range.
type Ranges struct {
	// ServiceCIDRs holds the primary range and, for dual-stack, a secondary range of the
	// other family. The primary's family is the cluster's default for new Services.
	ServiceCIDRs []*net.IPNet
	// NodePorts is the node port range.
	NodePorts utilnet.PortRange
}

// ParseRanges parses the two flags (empty means the default) with kube-apiserver's rules:
// at most two CIDRs, of different families when two; a range of at least 8 addresses; an
// IPv6 prefix no shorter than /64 (the IPAddress allocator's limit). The errors name the flag.
func ParseRanges(clusterIPRange, nodePortRange string) (Ranges, error) {
	var r Ranges
	if clusterIPRange == "" {
		clusterIPRange = DefaultServiceClusterIPRange
	}
	parts := strings.Split(clusterIPRange, ",")
	if len(parts) > 2 {
		return r, errors.New("--service-cluster-ip-range must not contain more than two entries")
	}
	for i, p := range parts {
		_, cidr, err := netutils.ParseCIDRSloppy(strings.TrimSpace(p))
		if err != nil {
			return r, fmt.Errorf("--service-cluster-ip-range[%d] %q is not a valid CIDR", i, p)
		}
		if netutils.RangeSize(cidr) < 8 {
			return r, fmt.Errorf("--service-cluster-ip-range[%d] %s: the service cluster IP range must be at least 8 IP addresses", i, cidr)
		}
		if ones, _ := cidr.Mask.Size(); netutils.IsIPv6CIDR(cidr) && ones < 64 {
			return r, fmt.Errorf("--service-cluster-ip-range[%d] %s: shortest allowed prefix length for an IPv6 service CIDR is 64", i, cidr)
		}
		r.ServiceCIDRs = append(r.ServiceCIDRs, cidr)
	}
	if len(r.ServiceCIDRs) == 2 {
		if dual, _ := netutils.IsDualStackCIDRs(r.ServiceCIDRs); !dual {
			return r, errors.New("--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family")
		}
	}
	if nodePortRange == "" {
		nodePortRange = DefaultServiceNodePortRange
	}
	pr, err := utilnet.ParsePortRange(nodePortRange)
	if err != nil {
		return r, fmt.Errorf("--service-node-port-range %q: %v", nodePortRange, err)
	}
	r.NodePorts = *pr
	return r, nil
}

// KubernetesServiceIP is the cluster IP of the default/kubernetes Service: the first
// address of the primary range (10.96.0.1 with the default range), as upstream.
func (r Ranges) KubernetesServiceIP() net.IP {
	if len(r.ServiceCIDRs) == 0 {
		return nil
	}
	ip, err := netutils.GetIndexedIP(r.ServiceCIDRs[0], 1)
	if err != nil {
		return nil
	}
	return ip
}
