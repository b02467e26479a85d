package pki

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// inClusterNames are the names pods use for the API server.
var inClusterNames = []string{
	"kubernetes",
	"kubernetes.default",
	"kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

// sanSet is a normalized set of subject alternative names: DNS names lower-cased, IPv4 in its
// 4-byte form, both sorted and without duplicates.
type sanSet struct {
	dns []string
	ips []net.IP
}

// servingSANs is the SAN set the serving certificate must carry for hosts and the machine's
// hostname (skipped when empty or not a valid DNS name).
func servingSANs(hosts []string, hostname string) (sanSet, error) {
	var s sanSet
	s.dns = append(s.dns, "localhost")
	s.dns = append(s.dns, inClusterNames...)
	s.ips = append(s.ips, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	if h := normalizeDNS(hostname); h != "" && len(validation.IsDNS1123Subdomain(h)) == 0 {
		s.dns = append(s.dns, h)
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); ip != nil {
			s.ips = append(s.ips, ip)
			continue
		}
		name := normalizeDNS(h)
		if errs := validation.IsWildcardDNS1123Subdomain(name); len(errs) == 0 {
			s.dns = append(s.dns, name)
			continue
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) != 0 {
			return sanSet{}, fmt.Errorf("host %q is neither an IP address nor a DNS name: %s", h, strings.Join(errs, "; "))
		}
		s.dns = append(s.dns, name)
	}
	return s.normalize(), nil
}

// sanSetOf is the SAN set a certificate carries.
func sanSetOf(c *x509.Certificate) sanSet {
	s := sanSet{ips: slices.Clone(c.IPAddresses)}
	for _, d := range c.DNSNames {
		s.dns = append(s.dns, normalizeDNS(d))
	}
	return s.normalize()
}

func normalizeDNS(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

func (s sanSet) normalize() sanSet {
	slices.Sort(s.dns)
	s.dns = slices.Compact(s.dns)
	for i, ip := range s.ips {
		if v4 := ip.To4(); v4 != nil {
			s.ips[i] = v4
		}
	}
	slices.SortFunc(s.ips, func(a, b net.IP) int { return strings.Compare(string(a), string(b)) })
	s.ips = slices.CompactFunc(s.ips, net.IP.Equal)
	return s
}

func (s sanSet) equal(o sanSet) bool {
	return slices.Equal(s.dns, o.dns) && slices.EqualFunc(s.ips, o.ips, net.IP.Equal)
}
