package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilnet "k8s.io/utils/net"

	agentdns "kubeos.dev/kube/internal/agent/dns"
	"kubeos.dev/kube/internal/servicealloc"
)

// ClusterDNSOptions configure the cluster DNS Service, kube-system/kube-dns, whose
// ClusterIP the node agents answer on (internal/agent/dns).
type ClusterDNSOptions struct {
	// ClusterDNS is the Service's ClusterIP (--cluster-dns; default: the tenth address of
	// the first --service-cluster-ip-range, 10.96.0.10 for the default range).
	ClusterDNS string
	// DisableClusterDNSService skips creating the Service.
	DisableClusterDNSService bool
}

func (o *ClusterDNSOptions) validate() error {
	if o.ClusterDNS != "" {
		if _, err := netip.ParseAddr(o.ClusterDNS); err != nil {
			return fmt.Errorf("--cluster-dns: %w", err)
		}
	}
	return nil
}

var errClusterDNSInvalid = errors.New("the kube-dns Service is refused")

// ClusterDNSAddress is the kube-dns Service's ClusterIP for the service range
// serviceRange (comma-separated: the first): clusterDNS when set, else the range's
// tenth address.
func ClusterDNSAddress(clusterDNS, serviceRange string) (string, error) {
	if clusterDNS != "" {
		return clusterDNS, nil
	}
	if serviceRange == "" {
		serviceRange = servicealloc.DefaultServiceClusterIPRange
	}
	_, cidr, err := net.ParseCIDR(strings.TrimSpace(strings.Split(serviceRange, ",")[0]))
	if err != nil {
		return "", fmt.Errorf("cluster DNS: service range: %w", err)
	}
	ip, err := utilnet.GetIndexedIP(cidr, 10)
	if err != nil {
		return "", fmt.Errorf("cluster DNS: service range %s has no tenth address: %w", cidr, err)
	}
	return ip.String(), nil
}

// ClusterDNSService is the kube-dns Service as kubeadm makes it (its labels, its ports),
// without a selector (each node answers on the address itself) and annotated so that
// the Service proxy leaves it alone.
func ClusterDNSService(clusterIP string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: agentdns.ServiceNamespace, Name: agentdns.ServiceName,
			Labels:      map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true"},
			Annotations: map[string]string{agentdns.NodeLocalAnnotation: "true", "prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
}

// ensureClusterDNS creates the kube-dns Service when it is missing. One that exists is
// left as it is (an administrator may have changed it), with a warning when its
// address is not the configured one.
func (s *Server) ensureClusterDNS(ctx context.Context) error {
	if s.opts.DisableClusterDNSService {
		return nil
	}
	ip, err := ClusterDNSAddress(s.opts.ClusterDNS, s.opts.ServiceClusterIPRange)
	if err != nil {
		return err
	}
	cs := s.apiserverClient
	want := ClusterDNSService(ip)
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services(agentdns.ServiceNamespace).Create(ctx, want, metav1.CreateOptions{})
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return true, nil
		case apierrors.IsInvalid(err):
			// E.g. the address is another Service's or outside the range: the server runs
			// without cluster DNS rather than not at all.
			s.opts.Log.Error("cluster DNS: cannot create the kube-dns Service; set --cluster-dns", "address", ip, "err", err)
			return false, errClusterDNSInvalid
		}
		s.opts.Log.Warn("bootstrap: create service kube-system/kube-dns", "err", err)
		return false, nil
	})
	if errors.Is(err, errClusterDNSInvalid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap service kube-system/kube-dns: %w", err)
	}
	svc, err := cs.CoreV1().Services(agentdns.ServiceNamespace).Get(ctx, agentdns.ServiceName, metav1.GetOptions{})
	if err == nil && svc.Spec.ClusterIP != ip {
		s.opts.Log.Warn("cluster DNS: the kube-dns Service has another address than --cluster-dns", "service", svc.Spec.ClusterIP, "configured", ip)
	}
	return nil
}
