package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// ErrNoUpstream: the node's resolv.conf names no server to recurse to.
var ErrNoUpstream = errors.New("dns: no upstream server")

// Forwarder recurses names outside the cluster zone to the node's upstream servers,
// in order, through its cache.
type Forwarder struct {
	// Servers are host:port addresses.
	Servers []string
	// Timeout is each attempt's (default 2 s).
	Timeout time.Duration
	// Cache keeps the answers (nil: no cache).
	Cache *Cache
}

// Exchange answers req (one question) from the cache or an upstream server; the answer
// carries req's ID.
func (f *Forwarder) Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, error) {
	q := req.Question[0]
	if f.Cache != nil {
		if m := f.Cache.Get(q); m != nil {
			m.Id = req.Id
			return m, nil
		}
	}
	if len(f.Servers) == 0 {
		return nil, ErrNoUpstream
	}
	up := new(dns.Msg)
	up.SetQuestion(q.Name, q.Qtype)
	up.Question[0].Qclass = q.Qclass
	up.RecursionDesired = true
	up.CheckingDisabled = req.CheckingDisabled
	up.SetEdns0(1232, false)
	timeout := f.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	var errs []error
	for _, s := range f.Servers {
		m, err := exchange(ctx, "udp", s, up, timeout)
		if err == nil && m.Truncated {
			m, err = exchange(ctx, "tcp", s, up, timeout)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if f.Cache != nil {
			f.Cache.Put(q, m)
		}
		m.Id = req.Id
		m.Extra = withoutOPT(m.Extra)
		return m, nil
	}
	return nil, fmt.Errorf("dns: forward %s: %w", q.Name, errors.Join(errs...))
}

func exchange(ctx context.Context, network, server string, m *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: timeout, UDPSize: 1232}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, _, err := c.ExchangeContext(ctx, m, server)
	return r, err
}

// Upstreams are the nameservers of a resolv.conf as host:port, without the addresses in
// exclude (the cluster DNS itself: forwarding to it would loop).
func Upstreams(resolvConf string, exclude ...netip.Addr) ([]string, error) {
	cfg, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return nil, fmt.Errorf("dns: %s: %w", resolvConf, err)
	}
	var out []string
	for _, s := range cfg.Servers {
		if a, err := netip.ParseAddr(s); err == nil && slices.Contains(exclude, a.Unmap()) {
			continue
		}
		out = append(out, net.JoinHostPort(s, cfg.Port))
	}
	return out, nil
}
