package dns

import (
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Cache keeps upstream answers: positive ones for their smallest TTL (at most MaxTTL),
// negative ones (NXDOMAIN, NODATA) for their SOA's minimum (RFC 2308, at most
// MaxNegativeTTL). Other answers (SERVFAIL, REFUSED, truncated) are not kept.
type Cache struct {
	// Size bounds the entries (default 10,000); a full cache drops an arbitrary entry.
	Size int
	// MaxTTL and MaxNegativeTTL cap what is kept (defaults 1 h and 30 min, CoreDNS's).
	MaxTTL, MaxNegativeTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry
}

type cacheKey struct {
	name         string
	qtype, class uint16
}

type cacheEntry struct {
	msg    *dns.Msg
	stored time.Time
	expiry time.Time
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func keyOf(q dns.Question) cacheKey {
	return cacheKey{name: strings.ToLower(q.Name), qtype: q.Qtype, class: q.Qclass}
}

// Get is a copy of the cached answer to q with its TTLs lowered by the time it has been
// kept, or nil.
func (c *Cache) Get(q dns.Question) *dns.Msg {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[keyOf(q)]
	if ok && !now.Before(e.expiry) {
		delete(c.entries, keyOf(q))
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	m := e.msg.Copy()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m
}

// Put keeps m, the answer to q, when it is cacheable.
func (c *Cache) Put(q dns.Question, m *dns.Msg) {
	ttl, ok := c.ttl(m)
	if !ok || ttl <= 0 {
		return
	}
	now := c.now()
	size := c.Size
	if size <= 0 {
		size = 10000
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[cacheKey]cacheEntry{}
	}
	if len(c.entries) >= size {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	kept := m.Copy()
	kept.Extra = withoutOPT(kept.Extra)
	c.entries[keyOf(q)] = cacheEntry{msg: kept, stored: now, expiry: now.Add(ttl)}
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// ttl decides how long m may be kept (pure).
func (c *Cache) ttl(m *dns.Msg) (time.Duration, bool) {
	maxTTL, maxNeg := c.MaxTTL, c.MaxNegativeTTL
	if maxTTL == 0 {
		maxTTL = time.Hour
	}
	if maxNeg == 0 {
		maxNeg = 30 * time.Minute
	}
	if m.Truncated {
		return 0, false
	}
	switch {
	case m.Rcode == dns.RcodeNameError || (m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0):
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				t := min(soa.Hdr.Ttl, soa.Minttl)
				return min(time.Duration(t)*time.Second, maxNeg), true
			}
		}
		return 0, false // no SOA: RFC 2308 says do not cache
	case m.Rcode == dns.RcodeSuccess:
		t := uint32(1<<31 - 1)
		for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
			for _, rr := range sec {
				t = min(t, rr.Header().Ttl)
			}
		}
		return min(time.Duration(t)*time.Second, maxTTL), true
	}
	return 0, false
}

func withoutOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}
