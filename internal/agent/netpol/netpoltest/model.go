package netpoltest

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Namespaces, Pods and Ports of the model.
var (
	Namespaces = []string{"x", "y", "z"}
	PodNames   = []string{"a", "b", "c"}
	Ports      = []int32{80, 81}
)

// PortName is the container port name of port (serve-80-tcp).
func PortName(port int32) string { return fmt.Sprintf("serve-%d-tcp", port) }

// ContainerPorts are every model pod's container ports.
func ContainerPorts() []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range Ports {
		out = append(out, corev1.ContainerPort{Name: PortName(p), ContainerPort: p, Protocol: corev1.ProtocolTCP})
	}
	return out
}

// AllPods are "x/a" … "z/c".
func AllPods() []string {
	var out []string
	for _, ns := range Namespaces {
		for _, p := range PodNames {
			out = append(out, ns+"/"+p)
		}
	}
	return out
}

// NamespaceLabels are a model namespace's base labels (ns=<name>, plus the
// kubernetes.io/metadata.name the API server sets).
func NamespaceLabels(ns string) map[string]string {
	return map[string]string{"ns": ns, "kubernetes.io/metadata.name": ns}
}

// PodLabels are a model pod's base labels (pod=<name>).
func PodLabels(pod string) map[string]string { return map[string]string{"pod": pod} }

// Env is what some policies need of the running pods: their addresses and the pods' CIDR.
type Env struct {
	IP      func(pod string) netip.Addr // pod is "ns/name"
	PodCIDR netip.Prefix
}

// Reach is a reachability matrix: from pod, to pod, port → connects.
type Reach struct {
	m map[string]bool
}

func key(from, to string, port int32) string { return fmt.Sprintf("%s>%s:%d", from, to, port) }

// NewReach is a matrix where every pair connects (v true) or none but a pod to itself.
func NewReach(v bool) *Reach {
	r := &Reach{m: map[string]bool{}}
	for _, f := range AllPods() {
		for _, t := range AllPods() {
			for _, p := range Ports {
				r.m[key(f, t, p)] = v || f == t
			}
		}
	}
	return r
}

// Sel picks pods: "x/a" one pod, "x/*" a namespace, "*/a" a name everywhere, "*" all.
func match(sel, pod string) bool {
	if sel == "*" {
		return true
	}
	sn, sp, _ := strings.Cut(sel, "/")
	pn, pp, _ := strings.Cut(pod, "/")
	return (sn == "*" || sn == pn) && (sp == "*" || sp == pp)
}

// Set sets from → to on the ports (none: both) to v; a pod to itself always connects.
func (r *Reach) Set(from, to string, v bool, ports ...int32) *Reach {
	if len(ports) == 0 {
		ports = Ports
	}
	for _, f := range AllPods() {
		for _, t := range AllPods() {
			if f == t || !match(from, f) || !match(to, t) {
				continue
			}
			for _, p := range ports {
				r.m[key(f, t, p)] = v
			}
		}
	}
	return r
}

// Get is from → to:port.
func (r *Reach) Get(from, to string, port int32) bool { return r.m[key(from, to, port)] }

// Diff lists the entries where got differs from r (the expected), one line each.
func (r *Reach) Diff(got *Reach) []string {
	var out []string
	for k, v := range r.m {
		if got.m[k] != v {
			out = append(out, fmt.Sprintf("%s: expected %v, got %v", k, v, got.m[k]))
		}
	}
	sort.Strings(out)
	return out
}

// Table prints the matrix for one port as upstream's truth table does (X = blocked).
func (r *Reach) Table(port int32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "port %d  ", port)
	for _, t := range AllPods() {
		fmt.Fprintf(&b, "%-4s", t)
	}
	b.WriteString("\n")
	for _, f := range AllPods() {
		fmt.Fprintf(&b, "%-8s", f)
		for _, t := range AllPods() {
			c := "."
			if !r.Get(f, t, port) {
				c = "X"
			}
			fmt.Fprintf(&b, "%-4s", c)
		}
		b.WriteString("\n")
	}
	return b.String()
}
