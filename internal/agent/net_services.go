package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"kubeos.dev/kube/internal/agent/proxy"
)

// ServicesOptions configure the Service proxy (the kube-proxy role, nftables); internal/agent/proxy does the work.
type ServicesOptions struct {
	// Enabled runs it (kube agent and kube server --agent: on by default).
	Enabled bool
	// Table is the nftables table (family ip) the proxy owns (default "kube-proxy").
	Table string
	// NodeRoutes programs a route to every other node's pod CIDR via that node's
	// InternalIP (internal/agent/routes; needs Options.ClusterCIDR). Off in the zero value;
	// the flags turn it on by default.
	NodeRoutes bool
	// LoopbackAPIServer is the API server's address:port when that server listens on an
	// IPv4 loopback address only (kube server's default --bind-address 127.0.0.1): the
	// kubernetes Service's ClusterIP traffic then goes there instead of to the address the
	// Service lists, where nothing listens, so that pods reach the API (client-go's
	// in-cluster configuration) and the node's processes too (proxy.Options.APIServer;
	// the pod bridge's route_localnet is turned on, guarded). "" keeps upstream's
	// behaviour. kube server --agent sets it when its bind address is loopback, kube agent
	// when its server URL is (LoopbackAPIServer).
	LoopbackAPIServer string
	// Probe, when set, stands for the kernel's answer to whether nftables can be programmed
	// (proxy.Options.Probe): tests make a node without nftables with it. No flag sets it.
	Probe func() error
}

// The node condition the agent keeps while the Service proxy is enabled: True once the
// proxy owns its nftables table, False with ReasonNFTablesUnavailable (and the kernel's
// error) while nftables cannot be programmed. The node stays Ready and runs its pods
// then, but it does not serve Services: there is no userspace fallback.
const (
	ConditionServiceProxyReady corev1.NodeConditionType = "ServiceProxyReady"
	ReasonNFTablesUnavailable                           = "NFTablesUnavailable"
	ReasonNFTablesProgrammed                            = "NFTablesProgrammed"
)

// nftablesRetry is how often an agent without nftables asks the kernel again.
const nftablesRetry = 10 * time.Second

// servicesState is what the agent knows of its Service proxy, for the node condition and
// /healthz/services.
type servicesState struct {
	mu      sync.Mutex
	proxy   *proxy.Proxier
	err     error // why nftables cannot be programmed (nil once the proxy runs)
	since   time.Time
	attempt int
}

// proxies holds each running agent's Service proxy state.
var proxies sync.Map // *Agent → *servicesState

func (a *Agent) servicesState() *servicesState {
	if s, ok := proxies.Load(a); ok {
		return s.(*servicesState)
	}
	return nil
}

// services prepares the Service proxy (the kube-proxy role, nftables) when enabled and
// returns what runs it until ctx ends (nil when disabled). Bad options stop the agent here.
// A node without nftables is not an error: the agent says so loudly (log, a Warning Event
// on the Node, the ServiceProxyReady condition False, /healthz/services 503), keeps running
// its pods, and asks the kernel again every nftablesRetry until it can take the table.
func (a *Agent) services(ctx context.Context) (func(context.Context) error, error) {
	if !a.opts.Services.Enabled {
		return nil, nil
	}
	a.mu.Lock()
	cluster := a.opts.ClusterCIDR
	if cluster == "" {
		cluster = a.podCIDR
	}
	a.mu.Unlock()
	// Events are the node's own (the networking identity may not write them).
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	recorder := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-proxy", Host: a.opts.NodeName})
	o := proxy.Options{
		Client: a.netClient(), NodeName: a.opts.NodeName, NodeIP: a.nodeIP, Table: a.opts.Services.Table,
		ServiceCIDR: a.opts.ServiceCIDR, ClusterCIDR: cluster, Log: a.log, Recorder: recorder, Probe: a.opts.Services.Probe,
		APIServer: a.opts.Services.LoopbackAPIServer, Bridge: a.opts.Bridge,
	}
	st := &servicesState{since: time.Now()}
	p, err := proxy.New(o)
	if err != nil && !errors.Is(err, proxy.ErrNoNFTables) {
		b.Shutdown()
		return nil, fmt.Errorf("agent: Service proxy: %w", err)
	}
	if err != nil {
		st.err, st.attempt = err, 1
		a.log.Error("NFTABLES UNAVAILABLE: this node does NOT serve Services (no ClusterIP, NodePort or externalIP rules; "+
			"no userspace fallback); its pods still run. Retrying.", "err", err, "retry", nftablesRetry)
		recorder.Eventf(a.nodeRef(), corev1.EventTypeWarning, ReasonNFTablesUnavailable,
			"Node %s cannot program nftables, so it does not serve Services: %v", a.opts.NodeName, err)
	} else {
		st.proxy = p
	}
	proxies.Store(a, st)
	a.statusChanged()
	return func(ctx context.Context) error {
		defer b.Shutdown()
		defer proxies.Delete(a)
		for st.current() == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(nftablesRetry):
			}
			p, err := proxy.New(o)
			switch {
			case err == nil:
				a.log.Info("nftables is available now: the Service proxy takes over the node's Services")
				recorder.Eventf(a.nodeRef(), corev1.EventTypeNormal, ReasonNFTablesProgrammed,
					"Node %s programs Services in nftables", a.opts.NodeName)
			case errors.Is(err, proxy.ErrNoNFTables):
				a.log.Warn("nftables still unavailable: Services are not served on this node", "err", err)
			default:
				return fmt.Errorf("agent: Service proxy: %w", err)
			}
			if st.set(p, err) {
				a.statusChanged()
			}
		}
		return st.current().Run(ctx)
	}, nil
}

// LoopbackAPIServer is the address:port of the API server URL rawURL when its host is an
// IPv4 loopback address ("localhost" counts as 127.0.0.1), else "": what
// ServicesOptions.LoopbackAPIServer wants for an agent whose server listens on loopback.
func LoopbackAPIServer(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	host := u.Hostname()
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Is4() || !ip.IsLoopback() {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(ip.String(), port)
}

// current is the running proxy (nil while nftables is unavailable).
func (s *servicesState) current() *proxy.Proxier {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proxy
}

// set records an attempt's outcome; it says whether the condition changes.
func (s *servicesState) set(p *proxy.Proxier, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempt++
	changed := (s.err == nil) != (err == nil) || (err != nil && s.err.Error() != err.Error())
	s.proxy, s.err = p, err
	if changed {
		s.since = time.Now()
	}
	return changed
}

// nodeRef is the Node as Events name it (the kubelet's: the UID is the name).
func (a *Agent) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: a.opts.NodeName, UID: types.UID(a.opts.NodeName)}
}

// statusChanged asks reportStatus to write the node's status now.
func (a *Agent) statusChanged() {
	select {
	case a.statusNow <- struct{}{}:
	default:
	}
}

// serviceConditions are the node's conditions of the Service proxy: none while it is
// disabled (or not started yet), else ServiceProxyReady.
func (a *Agent) serviceConditions(old []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	st := a.servicesState()
	if st == nil {
		return nil
	}
	st.mu.Lock()
	err := st.err
	st.mu.Unlock()
	return []corev1.NodeCondition{serviceProxyCondition(old, a.opts.Services.Table, err, now)}
}

// serviceProxyCondition is ServiceProxyReady for the proxy's state (nftErr: why nftables
// cannot be programmed, nil when it is), its transition time kept from old while its status
// stays. Pure.
func serviceProxyCondition(old []corev1.NodeCondition, table string, nftErr error, now metav1.Time) corev1.NodeCondition {
	if table == "" {
		table = "kube-proxy"
	}
	c := corev1.NodeCondition{Type: ConditionServiceProxyReady, Status: corev1.ConditionTrue, Reason: ReasonNFTablesProgrammed,
		Message: fmt.Sprintf("the Service proxy programs Services in the nftables table %s", table), LastHeartbeatTime: now, LastTransitionTime: now}
	if nftErr != nil {
		c.Status, c.Reason = corev1.ConditionFalse, ReasonNFTablesUnavailable
		c.Message = "nftables cannot be programmed, so this node does not serve Services (no userspace fallback): " + nftErr.Error()
	}
	for _, o := range old {
		if o.Type == c.Type && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
	}
	return c
}

// ServicesHandler serves the Service proxy's /debug/services (404 while it is disabled,
// 503 while nftables is unavailable); the agent's API mounts it.
func (a *Agent) ServicesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := a.servicesState()
		if st == nil {
			http.Error(w, "the Service proxy is not running", http.StatusNotFound)
			return
		}
		p := st.current()
		if p == nil {
			a.ServicesHealthHandler().ServeHTTP(w, r)
			return
		}
		p.Handler().ServeHTTP(w, r)
	})
}

// servicesHealth is /healthz/services's document (kube-proxy's /healthz's fields, and why
// not when it is not healthy).
type servicesHealth struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible bool      `json:"nodeEligible"`
	Reason       string    `json:"reason,omitempty"`
	Message      string    `json:"message,omitempty"`
}

// ServicesHealthHandler serves /healthz/services, the role of kube-proxy's /healthz: 200
// while the proxy programs nftables and has synced, 503 (with the reason) while nftables
// is unavailable or the first sync is still to come, 404 while the proxy is disabled.
func (a *Agent) ServicesHealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := a.servicesState()
		if st == nil {
			http.Error(w, "the Service proxy is not running", http.StatusNotFound)
			return
		}
		st.mu.Lock()
		h := servicesHealth{LastUpdated: st.since, CurrentTime: time.Now(), NodeEligible: true}
		p, err := st.proxy, st.err
		st.mu.Unlock()
		code := http.StatusOK
		switch {
		case err != nil:
			code, h.Reason, h.Message = http.StatusServiceUnavailable, ReasonNFTablesUnavailable, err.Error()
		case p != nil:
			if last, ok := p.LastSync(); ok {
				h.LastUpdated = last
			} else {
				code, h.Reason, h.Message = http.StatusServiceUnavailable, "NotSynced", "the first sync of the Service rules is still to come"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(h)
	})
}
