package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/gateway"
	"kubeos.dev/kube/internal/rbac"
	kubeosclient "kubeos.dev/kube/pkg/client/clientset/versioned"
)

// GatewayOptions configure the node's HTTP(S) gateway for Routes (issue 20);
// internal/gateway does the work.
type GatewayOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default; off in the zero
	// value, for tests).
	Enabled bool
	// Address is the listen address (default: all of the node's).
	Address string
	// HTTPPort and HTTPSPort are the ports (the flags default to 80 and 443; 0 in the
	// struct: not served; tests use free high ports).
	HTTPPort, HTTPSPort int
	// MetricsPort serves the kube_gateway_* metrics on /metrics (0: not served).
	MetricsPort int
	// AccessLog logs one line per request (logfmt, in the shape of the agent's text log)
	// to AccessLogWriter, buffered: in chunks, at the latest 100 ms after a request.
	AccessLog bool
	// AccessLogWriter receives the access log (default: the process's standard error,
	// where kube agent and kube server write their log; tests give a file).
	AccessLogWriter io.Writer
	// Registry receives the metrics (default: a registry of its own).
	Registry *prometheus.Registry
	// Ready, when set, is called with the bound addresses (tests).
	Ready func(http, https net.Addr)
}

func (o *GatewayOptions) validate() error {
	for flag, p := range map[string]int{"--gateway-http-port": o.HTTPPort, "--gateway-https-port": o.HTTPSPort, "--gateway-metrics-port": o.MetricsPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("agent: %s %d: out of range", flag, p)
		}
	}
	if o.HTTPPort != 0 && o.HTTPPort == o.HTTPSPort {
		return fmt.Errorf("agent: --gateway-http-port and --gateway-https-port are both %d", o.HTTPPort)
	}
	return nil
}

// startGateway starts the gateway when enabled; it stops when ctx ends and wg tracks it.
// It reads Routes, Releases, Services, EndpointSlices and TLS Secrets cluster-wide with
// the agent's credential (which needs the networking group's read rights on them). A
// gateway that cannot start (a port taken, no right to bind it) is logged as an error and
// does not stop the agent: the node's pods do not depend on it.
func (a *Agent) startGateway(ctx context.Context, wg *sync.WaitGroup) {
	run, err := a.gateway()
	if err == nil && run == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err == nil {
			err = run(ctx)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Error("the gateway stopped: this node serves no Routes", "err", err)
		}
	}()
}

// gateway prepares the gateway (nil when disabled).
func (a *Agent) gateway() (func(context.Context) error, error) {
	o := a.opts.Gateway
	if !o.Enabled {
		return nil, nil
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(a.opts.Config)
	if err != nil {
		return nil, fmt.Errorf("agent: gateway: %w", err)
	}
	xc, err := kubeosclient.NewForConfig(a.opts.Config)
	if err != nil {
		return nil, fmt.Errorf("agent: gateway: %w", err)
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	addr := func(p int) string {
		if p == 0 {
			return ""
		}
		return net.JoinHostPort(o.Address, strconv.Itoa(p))
	}
	log := a.log.With("component", "gateway")
	gopts := gateway.Options{Kube: kc, Kubeos: xc, HTTPAddr: addr(o.HTTPPort), HTTPSAddr: addr(o.HTTPSPort),
		Registerer: reg, Log: log, Ready: o.Ready}
	if o.AccessLog {
		gopts.AccessLog = o.AccessLogWriter
		if gopts.AccessLog == nil {
			gopts.AccessLog = os.Stderr
		}
	}
	g, err := gateway.New(gopts)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return func(ctx context.Context) error {
		if !waitGatewayAccess(ctx, kc, log) {
			return nil
		}
		if o.MetricsPort != 0 {
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			srv := &http.Server{Addr: addr(o.MetricsPort), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			l, err := net.Listen("tcp", srv.Addr)
			if err != nil {
				return fmt.Errorf("agent: --gateway-metrics-port: %w", err)
			}
			go func() {
				if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Warn("gateway metrics", "err", err)
				}
			}()
			defer srv.Close()
		}
		return g.Run(ctx)
	}, nil
}

// gatewayReads are what the gateway lists and watches cluster-wide (internal/rbac: the
// roles kube:node-networking and kube:node-gateway).
var gatewayReads = []authorizationv1.ResourceAttributes{
	{Group: "kubeos.dev", Resource: "routes"},
	{Group: "kubeos.dev", Resource: "releases"},
	{Resource: "services"},
	{Group: "discovery.k8s.io", Resource: "endpointslices"},
	{Resource: "secrets"},
}

// waitGatewayAccess asks the server (SelfSubjectAccessReview) whether the agent's
// credential may list and watch what the gateway reads. A credential without it (a node
// joined with a bootstrap token carries system:nodes only) gets one clear error naming the
// groups that grant it, instead of the informers' endless refusals, and the question is
// asked again every minute (a rotated credential may carry them). It returns false when
// ctx ends first.
func waitGatewayAccess(ctx context.Context, kc kubernetes.Interface, log *slog.Logger) bool {
	said := false
	for {
		missing, err := gatewayDenied(ctx, kc)
		if err == nil && len(missing) == 0 {
			if said {
				log.Info("the gateway's reads are allowed now: serving Routes")
			}
			return true
		}
		if !said {
			if err != nil {
				log.Error("the gateway cannot check its access; it serves no Routes until it can", "err", err)
			} else {
				log.Error("this node's credential may not list and watch what the gateway reads: it serves no Routes; "+
					"give the node a credential in the groups "+rbac.NodeNetworkingGroup+" and "+rbac.NodeGatewayGroup+
					", or run the agent with --gateway=false", "denied", missing)
			}
			said = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Minute):
		}
	}
}

// gatewayDenied lists the gatewayReads the credential may not list or watch cluster-wide.
func gatewayDenied(ctx context.Context, kc kubernetes.Interface) ([]string, error) {
	var missing []string
	for _, ra := range gatewayReads {
		for _, verb := range []string{"list", "watch"} {
			ra.Verb = verb
			r, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
			if err != nil {
				return nil, err
			}
			if !r.Status.Allowed {
				missing = append(missing, verb+" "+(&schema.GroupResource{Group: ra.Group, Resource: ra.Resource}).String())
			}
		}
	}
	return missing, nil
}
