package pods

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/probe"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
	tcpprobe "k8s.io/kubernetes/pkg/probe/tcp"
	"k8s.io/utils/ptr"
)

type probeKind int

const (
	startupProbe probeKind = iota
	readinessProbe
	livenessProbe
)

func (k probeKind) String() string { return [...]string{"Startup", "Readiness", "Liveness"}[k] }

// probeState is what the probes of one running container found.
type probeState struct {
	started, ready, liveFailed bool
	// pod is the UID of the container's pod (forgetPod).
	pod    types.UID
	cancel context.CancelFunc
}

// probes runs the probe workers of every running container and keeps their results.
type probes struct {
	mu     sync.Mutex
	byID   map[string]*probeState
	http   httpprobe.Prober
	tcp    tcpprobe.Prober
	grpc   grpcprobe.Prober
	execFn func(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
	event  func(pod *corev1.Pod, reason, msg string)
}

func newProbes(execFn func(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error), event func(*corev1.Pod, string, string)) *probes {
	return &probes{byID: map[string]*probeState{}, http: httpprobe.New(false), tcp: tcpprobe.New(), grpc: grpcprobe.New(), execFn: execFn, event: event}
}

// state returns (started, ready, liveFailed) of container id, starting its workers on the
// first call. startedAt is when the container started; podIP where HTTP and TCP probes go;
// changed is called when a result flips.
func (p *probes) state(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string, startedAt time.Time, changed func()) (bool, bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byID[id]
	if !ok {
		wctx, cancel := context.WithCancel(ctx)
		s = &probeState{started: c.StartupProbe == nil, ready: c.ReadinessProbe == nil, pod: pod.UID, cancel: cancel}
		p.byID[id] = s
		for kind, pr := range map[probeKind]*corev1.Probe{startupProbe: c.StartupProbe, readinessProbe: c.ReadinessProbe, livenessProbe: c.LivenessProbe} {
			if pr != nil {
				go p.work(wctx, pod, c, id, podIP, startedAt, kind, pr, changed)
			}
		}
	}
	// Without a readiness probe a container is ready once started.
	ready := s.ready && s.started
	return s.started, ready, s.liveFailed
}

// forgetPod stops the workers of the containers of one pod and drops their results. Only
// that pod's: the results of the other pods' containers must survive it, or each would be
// unready (no endpoint) until its next successful probe whenever any pod of the node stops.
func (p *probes) forgetPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, s := range p.byID {
		if s.pod == uid {
			s.cancel()
			delete(p.byID, id)
		}
	}
}

// work is one probe's loop, upstream's timing: nothing before initialDelaySeconds, one try
// per periodSeconds with timeoutSeconds, a result flipped after failureThreshold failures
// or successThreshold successes; readiness and liveness wait for the startup probe.
func (p *probes) work(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string, startedAt time.Time, kind probeKind, pr *corev1.Probe, changed func()) {
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	if d := time.Until(startedAt.Add(time.Duration(pr.InitialDelaySeconds) * time.Second)); d > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
	var okRun, failRun int32
	for {
		p.mu.Lock()
		s := p.byID[id]
		started := s != nil && s.started
		p.mu.Unlock()
		if s == nil {
			return
		}
		if kind == startupProbe || started {
			ok, msg := p.run(ctx, c, id, podIP, pr, timeout)
			if ctx.Err() != nil {
				return
			}
			if ok {
				okRun, failRun = okRun+1, 0
			} else {
				failRun, okRun = failRun+1, 0
				p.event(pod, "Unhealthy", fmt.Sprintf("%s probe failed: %s", kind, msg))
			}
			flip := false
			p.mu.Lock()
			switch kind {
			case startupProbe:
				if ok && !s.started {
					s.started, flip = true, true
				}
				if failRun >= max(pr.FailureThreshold, 1) && !s.liveFailed {
					s.liveFailed, flip = true, true
				}
			case readinessProbe:
				if ok && okRun >= max(pr.SuccessThreshold, 1) && !s.ready {
					s.ready, flip = true, true
				}
				if !ok && failRun >= max(pr.FailureThreshold, 1) && s.ready {
					s.ready, flip = false, true
				}
			case livenessProbe:
				if !ok && failRun >= max(pr.FailureThreshold, 1) && !s.liveFailed {
					s.liveFailed, flip = true, true
				}
			}
			done := kind == startupProbe && s.started || s.liveFailed
			p.mu.Unlock()
			if flip {
				changed()
			}
			if done {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// run tries pr once.
func (p *probes) run(ctx context.Context, c *corev1.Container, id, podIP string, pr *corev1.Probe, timeout time.Duration) (bool, string) {
	switch {
	case pr.Exec != nil:
		stdout, stderr, err := p.execFn(ctx, id, pr.Exec.Command, timeout)
		if err != nil {
			return false, strings.TrimSpace(err.Error() + " " + string(stdout) + string(stderr))
		}
		return true, ""
	case pr.HTTPGet != nil:
		req, err := httpprobe.NewRequestForHTTPGetAction(pr.HTTPGet, c, podIP, "probe")
		if err != nil {
			return false, err.Error()
		}
		res, out, err := p.http.Probe(req, timeout)
		return result(res, out, err)
	case pr.TCPSocket != nil:
		port, err := probe.ResolveContainerPort(pr.TCPSocket.Port, c)
		if err != nil {
			return false, err.Error()
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		res, out, err := p.tcp.Probe(host, port, timeout)
		return result(res, out, err)
	case pr.GRPC != nil:
		// The gRPC health protocol at the pod's address: only SERVING succeeds; the
		// service name is the probe's (empty: the server as a whole).
		res, out, err := p.grpc.Probe(podIP, ptr.Deref(pr.GRPC.Service, ""), int(pr.GRPC.Port), timeout, grpcprobe.ProbeOptions{})
		return result(res, out, err)
	}
	return false, "probe has no handler"
}

func result(res probe.Result, out string, err error) (bool, string) {
	if err != nil {
		return false, err.Error()
	}
	if res == probe.Success || res == probe.Warning {
		return true, ""
	}
	return false, out
}
