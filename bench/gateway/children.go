package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/gateway"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// proc is a child process of this binary.
type proc struct {
	cmd  *exec.Cmd
	addr string // what it printed on its first line: its listen address
	// procs is the child's GOMAXPROCS (its second line).
	procs int
}

// child starts this binary with args (under taskset when cpus is set).
func child(cpus string, args ...string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	name, argv := self, args
	if cpus != "" {
		name, argv = "taskset", append([]string{"-c", cpus, self}, args...)
	}
	cmd := exec.Command(name, argv...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v: %w", args, err)
	}
	br := bufio.NewReader(out)
	addr, err1 := br.ReadString('\n')
	procs, err2 := br.ReadString('\n')
	if err1 != nil || err2 != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("child %v did not start: %v %v", args, err1, err2)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(procs))
	return &proc{cmd: cmd, addr: strings.TrimSpace(addr), procs: n}, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// cpu is the process's user+system CPU time so far (all its threads).
func (p *proc) cpu() time.Duration { return procCPU(p.cmd.Process.Pid) }

// procCPU reads utime and stime of /proc/PID/stat (clock ticks, 100 per second).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: the fields after it start past ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * (time.Second / 100)
}

// announce prints the child's listen address and GOMAXPROCS for the parent.
func announce(l net.Listener) {
	fmt.Println(l.Addr())
	fmt.Println(runtime.GOMAXPROCS(0))
}

var body = []byte(strings.Repeat("x", 63) + "\n")

func serveUpstream(host string) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		log.Fatal(err)
	}
	announce(l)
	log.Fatal(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})))
}

// benchService is the Service "web" of namespace bench (ClusterIP 10.96.0.10:80) and its
// EndpointSlice: one ready endpoint, the upstream at hostPort.
func benchService(hostPort string) (*corev1.Service, *discoveryv1.EndpointSlice, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, nil, err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(p)}}}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "web-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(p)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, NodeName: ptr.To(benchNode),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}}}
	return svc, slice, nil
}

// serveGateway serves a table of n Routes; the last one's backend is the upstream.
func serveGateway(listen, upstream string, n int, profile, accessFile string) {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	in := gateway.Input{}
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		in.Routes = append(in.Routes, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(i), 0))},
			Spec: v1alpha1.RouteSpec{Hostnames: []string{name + ".bench"}, Rules: []v1alpha1.RouteRule{
				{Matches: []v1alpha1.RouteMatch{{Path: &v1alpha1.PathMatch{Type: v1alpha1.PathPrefix, Value: "/api"}},
					{Headers: []v1alpha1.ValueMatch{{Name: "X-Canary", Value: "1"}}}}, Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 80}}},
				{Backends: []v1alpha1.RouteBackend{{Component: "web", Port: 80}}}}}})
	}
	svc, slice, err := benchService(upstream)
	if err != nil {
		log.Fatal(err)
	}
	in.Services, in.EndpointSlices = []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice}
	o := gateway.Options{}
	if accessFile != "" {
		f, err := os.Create(accessFile)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		o.AccessLog = f // as the agent's default, a file descriptor (its standard error)
	}
	g, err := gateway.New(o)
	if err != nil {
		log.Fatal(err)
	}
	t := gateway.Compile(in)
	if len(t.Problems) > 0 {
		log.Fatal(t.Problems)
	}
	g.Swap(t)
	l, err := net.Listen("tcp", net.JoinHostPort(listen, "0"))
	if err != nil {
		log.Fatal(err)
	}
	announce(l)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := &http.Server{Handler: g}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
	g.Flush()
}
