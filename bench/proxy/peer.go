package main

import (
	"bufio"
	"fmt"
	"log"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
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

var serviceChain = regexp.MustCompile(`^service-[A-Z0-9]+-` + ns + `/(s[0-9]+)/tcp/http$`)

// watchPeer turns kube-proxy's programming into SyncEvents. The initial programming is
// polled (a service chain's first appearance in the kernel's chain list, every peerPoll:
// the initial transaction's notifications overflow a monitor's socket); after it, a rule
// written into a Service's chain is that Service changed, seen through the kernel's
// nftables notifications (`nft monitor rules`, started only once the initial programming
// is in). kube-proxy v1.37's nftables mode DNATs from the service chain
// through an anonymous numgen map, with no per-endpoint chain unless affinity or
// masquerading needs one, so a replaced endpoint is a rewritten service-chain rule.
// Initial-programming times are late by up to peerPoll.
func watchPeer(events chan<- proxy.SyncEvent) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	go func() {
		seen := map[string]bool{}
		for len(seen) < peerServices {
			time.Sleep(peerPoll)
			chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
			if err != nil {
				continue
			}
			now := time.Now()
			for _, ch := range chains {
				if m := serviceChain.FindStringSubmatch(ch.Name); ch.Table.Name == peerTable && m != nil && !seen[m[1]] {
					seen[m[1]] = true
					events <- proxy.SyncEvent{At: now, Services: []string{ns + "/" + m[1]}}
				}
			}
		}
		// The monitor is re-opened when it ends (an overflow of its socket in a large
		// transaction ends it with ENOBUFS); changes in a lost stretch count as missed.
		for {
			if err := monitorPeer(events); err != nil {
				log.Printf("nftables monitor: %v (re-opening)", err)
			}
		}
	}()
	return nil
}

// monitorPeer reports each rule kube-proxy adds to a Service's chain, read from `nft
// monitor rules` (kube-proxy needs the nft binary anyway), until the monitor ends.
// google/nftables' Monitor delivered none of these events here, where nft's own monitor
// prints them ("add rule ip kube-proxy service-<hash>-<ns>/<svc>/tcp/http meta l4proto tcp
// dnat ip to numgen random mod N map { … }").
func monitorPeer(events chan<- proxy.SyncEvent) error {
	cmd := exec.Command("nft", "monitor", "rules")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	prefix := "add rule ip " + peerTable + " "
	for sc.Scan() {
		now := time.Now()
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		chain, _, _ := strings.Cut(line[len(prefix):], " ")
		if m := serviceChain.FindStringSubmatch(chain); m != nil {
			events <- proxy.SyncEvent{At: now, Services: []string{ns + "/" + m[1]}}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("nft monitor ended")
}

// peerPoll is how often the peer's chains are listed during its initial programming.
const peerPoll = 50 * time.Millisecond

// peerServices is how many Services the run has (set by main before the peer starts).
var peerServices int
