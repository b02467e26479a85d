package main

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"sync"
	"time"

	"github.com/google/nftables"

	"kubeos.dev/kube/internal/agent/proxy"
)

// The upstream peer: kube-proxy v1.37.2 in nftables mode on the same Services, its rules
// in the table ip kube-proxy (its fixed name) of the host's namespace, removed at the end.
// Its syncs are seen through the kernel's nftables notifications (google/nftables'
// Monitor): a service chain made is a Service programmed, an endpoint chain made
// (endpoint-<hash>-<ns>/<svc>/tcp/http__<ip>/<port>) is that endpoint in the kernel.

const peerTable = "kube-proxy"

func peerCommand(bin, kubeconfig string, extra []string) *exec.Cmd {
	args := []string{"--proxy-mode=nftables", "--kubeconfig=" + kubeconfig, "--hostname-override=bench-node",
		"--conntrack-max-per-core=0", "--metrics-bind-address=127.0.0.1:" + freePort(), "--healthz-bind-address=127.0.0.1:" + freePort(),
		"--v=0"}
	return exec.Command(bin, append(args, extra...)...)
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// peerCleanup removes kube-proxy's tables (ip and ip6).
func peerCleanup() {
	c, err := nftables.New()
	if err != nil {
		return
	}
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		if t, err := c.ListTableOfFamily(peerTable, fam); err == nil && t != nil {
			c.DelTable(t)
		}
	}
	_ = c.Flush()
}

var endpointChain = regexp.MustCompile(`^endpoint-[A-Z0-9]+-` + ns + `/(s[0-9]+)/tcp/http__([0-9.]+)/8080$`)
var serviceChain = regexp.MustCompile(`^service-[A-Z0-9]+-` + ns + `/(s[0-9]+)/tcp/http$`)

// watchPeer turns kube-proxy's chain creations into SyncEvents: a service chain's first
// appearance is its Service programmed (the initial programming); after that, an endpoint
// chain's is its Service changed (the churn replaces one address per change).
func watchPeer(events chan<- proxy.SyncEvent) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	// A connection of its own for the monitor (a monitor's connection answers nothing else).
	mc, err := nftables.New()
	if err != nil {
		return err
	}
	mon := nftables.NewMonitor(nftables.WithMonitorObject(nftables.MonitorObjectChains), nftables.WithMonitorEventBuffer(1<<16))
	ch, err := mc.AddMonitor(mon)
	if err != nil {
		return fmt.Errorf("nftables monitor: %w", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	initial := true
	// The initial programming is one big transaction whose notifications overflow the
	// monitor's socket: its service chains are polled instead.
	go func() {
		for {
			time.Sleep(100 * time.Millisecond)
			chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
			if err != nil {
				continue
			}
			now := time.Now()
			mu.Lock()
			for _, ch := range chains {
				if ch.Table.Name != peerTable {
					continue
				}
				if m := serviceChain.FindStringSubmatch(ch.Name); m != nil && !seen[m[1]] {
					seen[m[1]] = true
					events <- proxy.SyncEvent{At: now, Services: []string{ns + "/" + m[1]}}
				}
			}
			done := len(seen) >= peerServices
			if done {
				initial = false
			}
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	go func() {
		for ev := range ch {
			now := time.Now()
			if ev.Type != nftables.MonitorEventTypeNewChain {
				continue
			}
			chain, ok := ev.Data.(*nftables.Chain)
			if !ok || chain.Table == nil || chain.Table.Name != peerTable || chain.Table.Family != nftables.TableFamilyIPv4 {
				continue
			}
			mu.Lock()
			if m := endpointChain.FindStringSubmatch(chain.Name); m != nil && !initial {
				events <- proxy.SyncEvent{At: now, Services: []string{ns + "/" + m[1]}}
			}
			mu.Unlock()
		}
	}()
	return nil
}

// peerServices is how many Services the run has (set by main before the peer starts).
var peerServices int
