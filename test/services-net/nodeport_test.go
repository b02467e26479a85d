package servicesnet

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"kubeos.dev/kube/test/netharness"
)

// TestNodePort: a NodePort answers on both nodes' addresses (from the host and from node
// B); with externalTrafficPolicy Local and its only endpoint on node B it answers on node
// B's address with the client's own address kept (not masqueraded, unlike policy
// Cluster), and node A, without a local endpoint, drops what comes from off the node.
func TestNodePort(t *testing.T) {
	cs := c.Clientset(t)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "np-a", c.A.Name, "np")
	backend(t, cs, ns, "np-b", c.B.Name, "np")
	backend(t, cs, ns, "loc-b", c.B.Name, "loc")
	waitReady(t, cs, ns, "np-a", "np-b", "loc-b")
	nodePort := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }
	np := service(t, cs, ns, "np", "np", nodePort)
	loc := service(t, cs, ns, "loc", "loc", func(s *corev1.Service) {
		nodePort(s)
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	port := strconv.Itoa(int(np.Spec.Ports[0].NodePort))
	locPort := strconv.Itoa(int(loc.Spec.Ports[0].NodePort))

	for _, n := range c.Nodes() {
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(n.IP, port))
		eventually(t, "NodePort on "+n.Name+" from the host", func() error {
			body, err := get(url)
			if err == nil && body != "np-a" && body != "np-b" {
				err = fmt.Errorf("answer %q", body)
			}
			return err
		})
		eventually(t, "NodePort on "+n.Name+" from node B", func() error {
			body, err := getFrom(context.Background(), c.B, url)
			if err == nil && body != "np-a" && body != "np-b" {
				err = fmt.Errorf("answer %q", body)
			}
			return err
		})
	}

	// Policy Local on node B keeps the host's address; policy Cluster masquerades it.
	locURL := fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(c.B.IP, locPort))
	eventually(t, "Local NodePort on node B keeps the client address", func() error {
		body, err := getIP(locURL)
		if err == nil && body != c.HostVethIP() {
			err = fmt.Errorf("the endpoint saw %q, want the host's %s", body, c.HostVethIP())
		}
		return err
	})
	clusterURL := fmt.Sprintf("http://%s/cgi-bin/ip", net.JoinHostPort(c.B.IP, port))
	eventually(t, "Cluster NodePort on node B masquerades", func() error {
		body, err := getIP(clusterURL)
		if err == nil && body == c.HostVethIP() {
			err = fmt.Errorf("the endpoint saw the client's own address %q", body)
		}
		return err
	})
	// Node A has no endpoint of loc: traffic from node B to node A's NodePort is dropped
	// (the rules are in place once the Cluster NodePort answered there above).
	eventually(t, "Local NodePort on node A drops off-node traffic", func() error {
		if body, err := getFrom(context.Background(), c.B, fmt.Sprintf("http://%s/", net.JoinHostPort(c.A.IP, locPort))); err == nil {
			return fmt.Errorf("node A answered %q", body)
		}
		return nil
	})
	// …while node A itself still reaches it (local traffic is short-circuited to all
	// endpoints, as upstream).
	eventually(t, "Local NodePort on node A from node A", func() error {
		body, err := get(fmt.Sprintf("http://%s/", net.JoinHostPort(c.A.IP, locPort)))
		if err == nil && body != "loc-b" {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
}

// getIP is get of /cgi-bin/ip: the client address busybox httpd saw (it writes IPv4 as
// "[::ffff:a.b.c.d]").
func getIP(url string) (string, error) {
	body, err := get(url)
	return strings.TrimSuffix(strings.TrimPrefix(body, "[::ffff:"), "]"), err
}
