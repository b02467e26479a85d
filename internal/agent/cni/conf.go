package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// Network is one agent's pod network.
type Network struct {
	// Name of the CNI network (and of the conflist file).
	Name string
	// Bridge is the Linux bridge's name (at most 15 bytes).
	Bridge string
	// PodCIDR is the node's pod range.
	PodCIDR netip.Prefix
	// IPAMDir is host-local's data directory.
	IPAMDir string
	// Routes are the destinations pods reach through the bridge's gateway: the cluster's
	// pod CIDR, the Service CIDR and the node's own address. No default route: the plugin
	// turns on ip_forward, and a pod address must never be forwarded off the machine.
	Routes []netip.Prefix
}

// Gateway is the first address of the pod CIDR, held by the bridge.
func (n Network) Gateway() netip.Addr { return n.PodCIDR.Masked().Addr().Next() }

// Validate checks the names and the range.
func (n Network) Validate() error {
	if n.Bridge == "" || len(n.Bridge) > 15 {
		return fmt.Errorf("cni: bridge name %q must be 1 to 15 characters", n.Bridge)
	}
	if !n.PodCIDR.IsValid() || !n.PodCIDR.Addr().Is4() || n.PodCIDR.Bits() > 30 {
		return fmt.Errorf("cni: pod CIDR %s must be an IPv4 range of at least 4 addresses", n.PodCIDR)
	}
	return nil
}

// ConfList is the CNI configuration list of n (bridge + host-local, portmap, loopback is
// run by containerd itself). Pure.
func ConfList(n Network) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       n.Name,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": n.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "dataDir": n.IPAMDir,
					"ranges": [][]map[string]string{{{"subnet": n.PodCIDR.Masked().String(), "gateway": n.Gateway().String()}}},
					"routes": routes(n),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": false},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// routes are the conflist's routes of n (its gateway is the bridge's), without duplicates
// and without the pod CIDR itself (on-link).
func routes(n Network) []map[string]string {
	out := []map[string]string{}
	seen := map[netip.Prefix]bool{n.PodCIDR.Masked(): true}
	for _, r := range n.Routes {
		r = r.Masked()
		if !r.IsValid() || !r.Addr().Is4() || seen[r] {
			continue
		}
		seen[r] = true
		out = append(out, map[string]string{"dst": r.String(), "gw": n.Gateway().String()})
	}
	return out
}

// Write writes n's conflist into confDir (replacing any other conflist there, so that
// containerd picks this one).
func Write(confDir string, n Network) error {
	b, err := ConfList(n)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(confDir, "*.conflist"))
	name := filepath.Join(confDir, "10-"+n.Name+".conflist")
	for _, f := range old {
		if f != name {
			_ = os.Remove(f)
		}
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	return os.Rename(tmp, name)
}
