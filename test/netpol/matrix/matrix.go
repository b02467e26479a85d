// Package matrix runs upstream's NetworkPolicy e2e matrix (internal/agent/netpol/netpoltest)
// on a test/netharness cluster: it makes namespaces x, y, z and the nine busybox pods (TCP 80
// and 81, placed on the nodes Place says), applies each step's policies and labels through
// the API, and probes every pod from every pod (one exec per source pod through the API's
// exec, in parallel), comparing the matrix with the expected one. Used by test/netpol.
package matrix

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/retry"

	"kubeos.dev/kube/internal/agent/netpol/netpoltest"
	"kubeos.dev/kube/test/netharness"
)

// Model is the running matrix.
type Model struct {
	CS  kubernetes.Interface
	cfg *rest.Config
	// IPs are the pods' addresses ("x/a" → address); Env the cases' view of them.
	IPs map[string]netip.Addr
	Env netpoltest.Env
	// Nodes are where each pod runs ("x/a" → node name).
	Nodes map[string]string
}

// serverScript routes the cluster and Service CIDRs through the pod's gateway (the agent's
// CNI configuration gives pods no route beyond their subnet yet; the pod has NET_ADMIN for
// this) and serves on 80 and 81 (busybox httpd).
func serverScript(clusterCIDR, serviceCIDR, gateway string) string {
	return fmt.Sprintf(`ip route add %s via %s 2>/dev/null; ip route add %s via %s 2>/dev/null; mkdir -p /w && echo ok > /w/index.html && httpd -p 80 -h /w && httpd -p 81 -h /w && exec sleep 2147483647`,
		clusterCIDR, gateway, serviceCIDR, gateway)
}

// New makes namespaces x, y, z and the nine pods, pod "x/a" on place("x/a"), and waits for
// their addresses.
func New(t *testing.T, c *netharness.Cluster, place func(pod string) netharness.Node) (*Model, error) {
	cs := c.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := &Model{CS: cs, cfg: c.Config(t), IPs: map[string]netip.Addr{}, Nodes: map[string]string{}}
	for _, ns := range netpoltest.Namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		for _, name := range netpoltest.PodNames {
			node := place(ns + "/" + name)
			cidr, err := netip.ParsePrefix(node.PodCIDR)
			if err != nil {
				return nil, fmt.Errorf("node %s pod CIDR %q: %w", node.Name, node.PodCIDR, err)
			}
			gw := cidr.Masked().Addr().Next()
			p := netharness.BusyboxPod(name, node.Name, serverScript(c.ClusterCIDR, c.ServiceCIDR, gw.String()))
			p.Labels = netpoltest.PodLabels(name)
			p.Spec.Containers[0].Ports = netpoltest.ContainerPorts()
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			m.Nodes[ns+"/"+name] = node.Name
		}
	}
	for _, name := range netpoltest.AllPods() {
		ns, pod, _ := strings.Cut(name, "/")
		p := netharness.WaitPod(t, cs, ns, pod, 3*time.Minute, "running with an address", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
		})
		m.IPs[name] = netip.MustParseAddr(p.Status.PodIP)
	}
	m.Env = netpoltest.Env{IP: func(p string) netip.Addr { return m.IPs[p] }, PodCIDR: netip.MustParsePrefix(c.ClusterCIDR)}
	return m, nil
}

// Exec runs cmd in the pod's container through the API's exec (WebSocket) and returns stdout.
func (m *Model) Exec(ctx context.Context, ns, pod string, cmd ...string) (string, error) {
	q := url.Values{"container": {"main"}, "stdout": {"true"}, "stderr": {"true"}, "command": cmd}
	u := m.CS.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").URL()
	u.RawQuery = q.Encode()
	ex, err := remotecommand.NewWebSocketExecutor(m.cfg, "GET", u.String())
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		return out.String(), fmt.Errorf("exec in %s/%s: %w: %s", ns, pod, err, errOut.String())
	}
	return out.String(), nil
}

// probeScript connects to each target on each port (busybox nc; its wget -T crashes) and
// prints "<target> <port> 1|0".
func probeScript(targets map[string]string, ports []int32) string {
	var b strings.Builder
	b.WriteString("for t in")
	for _, name := range sortedKeys(targets) {
		fmt.Fprintf(&b, " %s=%s", name, targets[name])
	}
	b.WriteString("; do n=${t%%=*}; a=${t#*=}; for p in")
	for _, p := range ports {
		fmt.Fprintf(&b, " %d", p)
	}
	b.WriteString(`; do if nc -w 2 "$a" "$p" </dev/null >/dev/null 2>&1; then echo "$n $p 1"; else echo "$n $p 0"; fi; done; done`)
	return b.String()
}

// Probe is the whole matrix: every pod to every pod's address on 80 and 81.
func (m *Model) Probe(ctx context.Context) (*netpoltest.Reach, error) {
	targets := map[string]string{}
	for name, ip := range m.IPs {
		targets[name] = ip.String()
	}
	got := netpoltest.NewReach(true)
	script := probeScript(targets, netpoltest.Ports)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, from := range netpoltest.AllPods() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, pod, _ := strings.Cut(from, "/")
			out, err := m.Exec(ctx, ns, pod, "sh", "-c", script)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			n := 0
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var to string
				var port int32
				var ok int
				if _, err := fmt.Sscanf(l, "%s %d %d", &to, &port, &ok); err != nil {
					errs = append(errs, fmt.Errorf("probe from %s: line %q", from, l))
					continue
				}
				got.Put(from, to, port, ok == 1)
				n++
			}
			if want := len(targets) * len(netpoltest.Ports); n != want {
				errs = append(errs, fmt.Errorf("probe from %s: %d answers, want %d: %q", from, n, want, out))
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("%v", errs)
	}
	return got, nil
}

// Apply makes the cluster hold exactly the case's policies (in x, y, z) and labels.
func (m *Model) Apply(ctx context.Context, c netpoltest.Case) error {
	for _, ns := range netpoltest.Namespaces {
		want := map[string]string{"ns": ns, "kubernetes.io/metadata.name": ns}
		maps.Copy(want, c.NamespaceLabels[ns])
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := m.CS.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if maps.Equal(n.Labels, want) {
				return nil
			}
			n.Labels = want
			_, err = m.CS.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("namespace %s labels: %w", ns, err)
		}
	}
	for _, name := range netpoltest.AllPods() {
		ns, pod, _ := strings.Cut(name, "/")
		want := netpoltest.PodLabels(pod)
		maps.Copy(want, c.PodLabels[name])
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := m.CS.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if maps.Equal(p.Labels, want) {
				return nil
			}
			p.Labels = want
			_, err = m.CS.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("pod %s labels: %w", name, err)
		}
	}
	wanted := map[string]*networkingv1.NetworkPolicy{}
	if c.Policies != nil {
		for _, p := range c.Policies(m.Env) {
			wanted[p.Namespace+"/"+p.Name] = p
		}
	}
	for _, ns := range netpoltest.Namespaces {
		l, err := m.CS.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if _, ok := wanted[ns+"/"+p.Name]; !ok {
				if err := m.CS.NetworkingV1().NetworkPolicies(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
	}
	for _, key := range sortedKeys(wanted) {
		p := wanted[key].DeepCopy()
		api := m.CS.NetworkingV1().NetworkPolicies(p.Namespace)
		old, err := api.Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, p, metav1.CreateOptions{})
		case err == nil:
			p.ResourceVersion = old.ResourceVersion
			_, err = api.Update(ctx, p, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("policy %s: %w", key, err)
		}
	}
	return nil
}

// Check probes until the matrix is want (the agents program the kernel a moment after the
// API change) or a minute passes, and fails t with the difference.
func (m *Model) Check(t *testing.T, ctx context.Context, what string, want *netpoltest.Reach) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got *netpoltest.Reach
	var err error
	for {
		got, err = m.Probe(ctx)
		if err == nil && len(want.Diff(got)) == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("%s: probe: %v", what, err)
	}
	t.Fatalf("%s: %d differences:\n%s\nexpected:\n%s%s\ngot:\n%s%s", what, len(want.Diff(got)), strings.Join(want.Diff(got), "\n"),
		want.Table(80), want.Table(81), got.Table(80), got.Table(81))
}

// Run applies every case in order and checks its matrix, one subtest each.
func (m *Model) Run(t *testing.T, logf func(string, ...any)) {
	cases := netpoltest.Cases()
	if len(cases) < 25 {
		t.Fatalf("%d cases, want at least 25", len(cases))
	}
	for i, c := range cases {
		ok := t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := m.Apply(ctx, c); err != nil {
				t.Fatal(err)
			}
			m.Check(t, ctx, c.Upstream, c.Expect(m.Env))
		})
		if !ok {
			if logf != nil {
				logf("case %s failed", c.Name)
			}
			// Each case starts from the state the one before left, and a failed case
			// waits a minute: the rest would only repeat the first failure.
			t.Errorf("case %s failed: the %d cases after it were not run", c.Name, len(cases)-i-1)
			return
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
