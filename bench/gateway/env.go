package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"kubeos.dev/kube/internal/agent/proxy"
)

const (
	innerEnv  = "KUBE_GWBENCH_INNER" // set in the re-executed process
	podIP     = "10.1.0.1"           // the upstream's address in the namespace (on lo)
	clusterIP = "10.96.0.10"
	svcCIDR   = "10.96.0.0/12"
	benchNode = "gwbench"
	nftTable  = "kube-gwbench"
)

// reexec runs this command again inside a network namespace of its own and/or on the
// load's CPUs, unless this is that run; it reports whether it did (and the run is over).
func reexec(c config) bool {
	if os.Getenv(innerEnv) != "" || (!c.netns && c.pinLoad == "") {
		return false
	}
	var argv []string
	if c.netns {
		argv = append(argv, "unshare", "--net", "--")
	}
	if c.pinLoad != "" {
		argv = append(argv, "taskset", "-c", c.pinLoad)
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	argv = append(argv, self)
	argv = append(argv, os.Args[1:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		log.Fatalf("%v: %v", argv, err)
	}
	return true
}

// environment is the running children and targets.
type environment struct {
	netns    bool
	up, gw   *proc
	targets  []string
	byName   map[string]target
	gwProcs  int
	stopFns  []func()
	accessTo string
}

func (e *environment) stop() {
	for _, f := range slices.Backward(e.stopFns) {
		f()
	}
}

// setup brings lo up with the pod address (in the namespace), starts the upstream, the
// gateway and the Service proxy as the targets need them, and checks each target answers.
func setup(c config) (*environment, error) {
	klog.SetLogger(logr.Discard()) // the Service proxy's informers
	e := &environment{netns: c.netns && os.Getenv(innerEnv) != "", byName: map[string]target{}}
	ok := false
	defer func() {
		if !ok {
			e.stop()
		}
	}()
	host := "127.0.0.1"
	if e.netns {
		if err := netnsLo(); err != nil {
			return nil, err
		}
		host = podIP
	}
	up, err := child(c.pinLoad, "-role=upstream", "-listen="+host)
	if err != nil {
		return nil, err
	}
	e.up = up
	e.stopFns = append(e.stopFns, up.stop)
	for _, name := range c.targets {
		switch name {
		case "endpoint":
			e.byName[name] = target{name: name, addr: up.addr, host: "upstream"}
		case "service":
			if !e.netns {
				log.Printf("target service skipped: it needs -netns (root), so the ClusterIP's nftables table and routes stay in a namespace of this run")
				continue
			}
			stop, err := serviceProxy(up.addr)
			if err != nil {
				return nil, fmt.Errorf("the Service's ClusterIP: %w", err)
			}
			e.stopFns = append(e.stopFns, stop)
			e.byName[name] = target{name: name, addr: net.JoinHostPort(clusterIP, "80"), host: "web.bench.svc"}
		case "gateway":
			args := []string{"-role=gateway", "-listen=127.0.0.1", "-upstream=" + up.addr, "-routes=" + strconv.Itoa(c.routes),
				"-cpuprofile=" + c.profile}
			if c.accessLog {
				dir, err := os.MkdirTemp("", "gwbench-")
				if err != nil {
					return nil, err
				}
				e.stopFns = append(e.stopFns, func() { os.RemoveAll(dir) })
				e.accessTo = filepath.Join(dir, "access.log")
				args = append(args, "-access-file="+e.accessTo)
			}
			gw, err := child(c.pinGateway, args...)
			if err != nil {
				return nil, err
			}
			e.gw, e.gwProcs = gw, gw.procs
			e.stopFns = append(e.stopFns, gw.stop)
			e.byName[name] = target{name: name, addr: gw.addr, host: fmt.Sprintf("r%d.bench", c.routes-1)}
		}
		if t, ok := e.byName[name]; ok {
			e.targets = append(e.targets, name)
			if err := do(newClient(1), t); err != nil {
				return nil, fmt.Errorf("target %s (%s): %w", name, t.addr, err)
			}
		}
	}
	log.Printf("targets %v; upstream %s (GOMAXPROCS %d), gateway GOMAXPROCS %d, generator GOMAXPROCS %d, netns %v",
		e.targets, up.addr, up.procs, e.gwProcs, runtime.GOMAXPROCS(0), e.netns)
	ok = true
	return e, nil
}

// netnsLo brings the namespace's lo up and gives it the pod address.
func netnsLo() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	a, _ := netlink.ParseAddr(podIP + "/32")
	if err := netlink.AddrReplace(lo, a); err != nil {
		return fmt.Errorf("address %s on lo: %w", podIP, err)
	}
	return nil
}

// serviceProxy programs the Service bench/web (ClusterIP 10.96.0.10:80 → the upstream)
// with Kube's Service proxy over a fake API holding the Service and its EndpointSlice.
func serviceProxy(upstream string) (func(), error) {
	svc, slice, err := benchService(upstream)
	if err != nil {
		return nil, err
	}
	synced := make(chan struct{}, 1)
	px, err := proxy.New(proxy.Options{Client: fake.NewClientset(svc, slice), NodeName: benchNode, Table: nftTable,
		ServiceCIDR: svcCIDR, Synced: func(proxy.SyncEvent) {
			select {
			case synced <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = px.Run(ctx) }()
	stop := func() {
		cancel()
		<-done
		_ = proxy.Cleanup(context.Background(), nftTable, svcCIDR)
	}
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
		stop()
		return nil, errors.New("the Service proxy did not program the Service in 30 s")
	}
	return stop, nil
}

// measure runs f (which returns requests/s, p50, p99, requests answered and errors) and
// adds each process's CPU per answered request.
func (e *environment) measure(t target, f func() (float64, float64, float64, int64, int64)) result {
	self := os.Getpid()
	gw0, up0, me0 := time.Duration(0), e.up.cpu(), procCPU(self)
	if e.gw != nil {
		gw0 = e.gw.cpu()
	}
	rps, p50, p99, n, errs := f()
	res := result{Target: t.name, RPS: round3(rps), P50: p50, P99: p99, Errors: errs}
	if n == 0 {
		return res
	}
	per := func(d time.Duration) float64 { return round3(float64(d.Microseconds()) / float64(n)) }
	res.UpCPU, res.LoadCPU = per(e.up.cpu()-up0), per(procCPU(self)-me0)
	if t.name == "gateway" {
		res.GwCPU = per(e.gw.cpu() - gw0)
	}
	return res
}
