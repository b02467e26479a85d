package nodeipam

import (
	"errors"
	"fmt"
	"net"
	"strings"

	netutils "k8s.io/utils/net"
)

// Defaults of kube-controller-manager (and of Kube's --cluster-cidr, flannel's and kind's
// pod network).
const (
	DefaultClusterCIDR  = "10.244.0.0/16"
	DefaultMaskSizeIPv4 = 24
	DefaultMaskSizeIPv6 = 64
)

// Config is what the allocator needs, parsed from the flags.
type Config struct {
	// ClusterCIDRs are one CIDR, or two of different families (dual-stack).
	ClusterCIDRs []*net.IPNet
	// MaskSizes are the node block prefix lengths, one per cluster CIDR.
	MaskSizes []int
}

// ParseConfig parses --cluster-cidr (comma-separated, at most one per family) and the mask
// sizes: maskSize is --node-cidr-mask-size (single-stack only), maskV4 and maskV6 are
// --node-cidr-mask-size-ipv4/-ipv6; zero means the default.
func ParseConfig(clusterCIDR string, maskSize, maskV4, maskV6 int) (Config, error) {
	var cidrs []*net.IPNet
	for _, s := range strings.Split(clusterCIDR, ",") {
		_, c, err := netutils.ParseCIDRSloppy(strings.TrimSpace(s))
		if err != nil {
			return Config{}, fmt.Errorf("--cluster-cidr %q: %w", clusterCIDR, err)
		}
		cidrs = append(cidrs, c)
	}
	switch {
	case len(cidrs) > 2:
		return Config{}, fmt.Errorf("--cluster-cidr %q: at most two CIDRs (one per family)", clusterCIDR)
	case len(cidrs) == 2:
		if ok, _ := netutils.IsDualStackCIDRs(cidrs); !ok {
			return Config{}, fmt.Errorf("--cluster-cidr %q: two CIDRs must be of different families", clusterCIDR)
		}
		if maskSize != 0 {
			return Config{}, errors.New("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
		}
	case maskSize != 0 && (maskV4 != 0 || maskV6 != 0):
		return Config{}, errors.New("--node-cidr-mask-size and --node-cidr-mask-size-ipv4/-ipv6 are mutually exclusive")
	}
	cfg := Config{ClusterCIDRs: cidrs}
	for _, c := range cidrs {
		size, def := maskV4, DefaultMaskSizeIPv4
		if netutils.IsIPv6CIDR(c) {
			size, def = maskV6, DefaultMaskSizeIPv6
		}
		if maskSize != 0 {
			size = maskSize
		}
		if size == 0 {
			size = def
		}
		ones, bits := c.Mask.Size()
		switch {
		case size < ones || size > bits:
			return Config{}, fmt.Errorf("node CIDR mask size %d does not fit the cluster CIDR %s", size, c)
		case size-ones > 16:
			// upstream's cidrset refuses more than 2^16 node blocks (ErrCIDRSetSubNetTooBig)
			return Config{}, fmt.Errorf("node CIDR mask size %d splits the cluster CIDR %s into more than 65536 blocks", size, c)
		}
		cfg.MaskSizes = append(cfg.MaskSizes, size)
	}
	return cfg, nil
}
