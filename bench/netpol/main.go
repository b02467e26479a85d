// Command netpol measures NetworkPolicy programming on this node's kernel: a synthetic
// cluster (namespaces × pods, the local share of them on "this" node, policies selecting
// by pod and namespace labels, ipBlocks, named ports), then a churn of single changes (a
// pod's label, a pod added, a policy's port) — each change's Compute + incremental Sync
// timed, beside a full table replace of the same Program. Runs in a throwaway network
// namespace (nothing on the host is touched).
//
//	go run ./bench/netpol -namespaces 50 -pods 20 -local 110 -policies 200 -changes 300
package main

import (
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubeos.dev/kube/internal/agent/netpol"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	nss := flag.Int("namespaces", 50, "namespaces")
	perNS := flag.Int("pods", 20, "pods per namespace")
	local := flag.Int("local", 110, "pods on this node (of all)")
	policies := flag.Int("policies", 200, "policies (spread over the namespaces)")
	changes := flag.Int("changes", 300, "single changes timed")
	flag.Parse()

	name := fmt.Sprintf("knp-bench-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := nftables.WithNetNSFd(int(f.Fd()))

	s := state(*nss, *perNS, *local, *policies)
	t0 := time.Now()
	prog, errs := netpol.Compute(s)
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	compute := time.Since(t0)
	inc := netpol.NewTable("bench", fd)
	t0 = time.Now()
	if err := inc.Sync(prog); err != nil {
		return err
	}
	first := time.Since(t0)
	elements := 0
	for _, ivs := range prog.Sets {
		elements += len(ivs)
	}
	nLocal := 0
	for _, p := range s.Pods {
		if p.Local {
			nLocal++
		}
	}
	fmt.Printf("cluster: %d pods (%d local), %d namespaces, %d policies -> %d local pods filtered, %d sets, %d intervals\n",
		len(s.Pods), nLocal, *nss, *policies, len(prog.Pods), len(prog.Sets), elements)
	fmt.Printf("first program: compute %v, table (one transaction) %v\n", compute.Round(time.Microsecond), first.Round(time.Microsecond))

	var incT, computeT, fullT []time.Duration
	full := netpol.NewTable("bench-full", fd)
	for i := 0; i < *changes; i++ {
		change(&s, i)
		t0 := time.Now()
		prog, _ := netpol.Compute(s)
		c := time.Since(t0)
		if err := inc.Sync(prog); err != nil {
			return err
		}
		incT = append(incT, time.Since(t0))
		computeT = append(computeT, c)
		full = netpol.NewTable("bench-full", fd) // a new Table replaces the whole table
		t1 := time.Now()
		if err := full.Sync(prog); err != nil {
			return err
		}
		fullT = append(fullT, time.Since(t1)+c)
	}
	fmt.Printf("%d changes (pod label / pod added / policy port, in turn):\n", *changes)
	fmt.Printf("  compute only            p50 %v  p99 %v\n", pct(computeT, 50), pct(computeT, 99))
	fmt.Printf("  compute + incremental   p50 %v  p99 %v\n", pct(incT, 50), pct(incT, 99))
	fmt.Printf("  compute + full replace  p50 %v  p99 %v\n", pct(fullT, 50), pct(fullT, 99))
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100].Round(time.Microsecond)
}

func ns(i int) string { return fmt.Sprintf("ns%d", i) }

// state is the synthetic cluster: pods app-<k> with labels app=<k%5>, tier=<k%3>; policies
// in turn: default deny, allow from app in the namespace on a named port, allow from
// namespaces team=<j%4> on a port range, egress to an ipBlock with except.
func state(nss, perNS, local, policies int) netpol.State {
	s := netpol.State{Namespaces: map[string]map[string]string{}}
	ip := netip.MustParseAddr("10.50.0.2")
	n := 0
	for i := 0; i < nss; i++ {
		s.Namespaces[ns(i)] = map[string]string{"team": fmt.Sprint(i % 4), "kubernetes.io/metadata.name": ns(i)}
		for k := 0; k < perNS; k++ {
			s.Pods = append(s.Pods, netpol.Pod{Namespace: ns(i), Name: fmt.Sprintf("app-%d", k), IP: ip, Local: n%(nss*perNS/local+1) == 0,
				Labels: map[string]string{"app": fmt.Sprint(k % 5), "tier": fmt.Sprint(k % 3)},
				Ports:  []corev1.ContainerPort{{Name: "http", ContainerPort: int32(8080 + k%3), Protocol: corev1.ProtocolTCP}}})
			ip = ip.Next()
			n++
		}
	}
	tcp := corev1.ProtocolTCP
	for j := 0; j < policies; j++ {
		p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns(j % nss), Name: fmt.Sprintf("p%d", j)}}
		sel := metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint(j % 5)}}
		switch j % 4 {
		case 0:
			p.Spec.PodSelector = metav1.LabelSelector{}
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		case 1:
			port := intstr.FromString("http")
			p.Spec.PodSelector = sel
			p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": fmt.Sprint(j % 3)}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}
		case 2:
			port, end := intstr.FromInt32(8000), int32(8100)
			p.Spec.PodSelector = sel
			p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprint(j % 4)}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port, EndPort: &end}}}}
		case 3:
			p.Spec.PodSelector = sel
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.50.0.0/16", Except: []string{fmt.Sprintf("10.50.%d.0/24", j%4)}}}}}}
		}
		s.Policies = append(s.Policies, p)
	}
	return s
}

// change makes the i-th change: a pod's tier label, a pod added, a policy's port.
func change(s *netpol.State, i int) {
	switch i % 3 {
	case 0:
		p := &s.Pods[(i*7919)%len(s.Pods)]
		l := map[string]string{}
		for k, v := range p.Labels {
			l[k] = v
		}
		l["tier"] = fmt.Sprint(i % 3)
		p.Labels = l
	case 1:
		last := s.Pods[len(s.Pods)-1]
		np := last
		np.Name = fmt.Sprintf("new-%d", i)
		np.IP = last.IP.Next()
		np.Local = i%2 == 0
		s.Pods = append(s.Pods, np)
	case 2:
		j := (i * 31) % len(s.Policies)
		p := s.Policies[j].DeepCopy()
		if len(p.Spec.Ingress) > 0 && len(p.Spec.Ingress[0].Ports) > 0 && p.Spec.Ingress[0].Ports[0].EndPort != nil {
			end := *p.Spec.Ingress[0].Ports[0].EndPort + 1
			p.Spec.Ingress[0].Ports[0].EndPort = &end
		}
		s.Policies[j] = p
	}
}
