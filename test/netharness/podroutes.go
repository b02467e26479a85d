package netharness

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// podRoutes works around pods having no route beyond their own pod CIDR (the agent's CNI
// configuration, internal/agent/cni, gives them none yet): for every pod network namespace
// of this cluster (the agents' containerd state dirs, .../io.containerd.grpc.v1.cri/netns/)
// it adds routes to the cluster CIDR, the Service CIDR, the nodes' addresses and the host's
// veth address via the
// pod's gateway, polling until stop is closed. Where the routes exist already (a CNI
// configuration that gives them) `ip route replace` changes nothing.
func (c *Cluster) podRoutes(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	cluster := netip.MustParsePrefix(c.ClusterCIDR)
	done := map[string]bool{}
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		var paths []string
		for _, agent := range []string{"agent-a", "agent-b"} {
			dir := filepath.Join(c.Dir, agent, "containerd", "state", "io.containerd.grpc.v1.cri", "netns")
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
		for _, path := range paths {
			name := path
			if done[name] {
				continue
			}
			out, err := exec.Command("nsenter", "--net="+path, "--", "ip", "-4", "-o", "addr", "show").Output()
			if err != nil {
				continue
			}
			var addr netip.Prefix
			hasAddr := false
			for _, f := range strings.Fields(string(out)) {
				if p, err := netip.ParsePrefix(f); err == nil && !p.Addr().IsLoopback() {
					hasAddr = true
					if cluster.Contains(p.Addr()) {
						addr = p
					}
				}
			}
			if !addr.IsValid() {
				// Another cluster's pod; or no address yet (the CNI plugin is still at it).
				done[name] = hasAddr
				continue
			}
			gw := addr.Masked().Addr().Next()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ok := true
			dsts := []string{c.ClusterCIDR, c.ServiceCIDR}
			for _, n := range c.Nodes() {
				if n.IP != "" {
					dsts = append(dsts, n.IP+"/32")
				}
			}
			if c.opts.SecondNode {
				dsts = append(dsts, c.HostVethIP()+"/32")
			}
			for _, dst := range dsts {
				if run(ctx, "nsenter", "--net="+path, "--", "ip", "route", "replace", dst, "via", gw.String()) != nil {
					ok = false
				}
			}
			cancel()
			done[name] = ok
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}
