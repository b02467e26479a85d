package netpol

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
)

// Interval is an inclusive range of IPv4 addresses, as uint32.
type Interval struct{ First, Last uint32 }

// String is a.b.c.d-e.f.g.h (or one address).
func (i Interval) String() string {
	if i.First == i.Last {
		return u32Addr(i.First).String()
	}
	return u32Addr(i.First).String() + "-" + u32Addr(i.Last).String()
}

func addrU32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

func u32Addr(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

// hostInterval is the one address a.
func hostInterval(a netip.Addr) Interval { u := addrU32(a); return Interval{u, u} }

// prefixInterval is the range of an IPv4 prefix.
func prefixInterval(p netip.Prefix) Interval {
	p = p.Masked()
	first := addrU32(p.Addr())
	size := uint64(1) << (32 - p.Bits())
	return Interval{first, uint32(uint64(first) + size - 1)}
}

// parseIPv4Prefix parses a CIDR (an address alone is a /32); IPv6 is refused.
func parseIPv4Prefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, fmt.Errorf("netpol: %q: %w", s, err)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("netpol: %q is not IPv4", s)
	}
	return p, nil
}

// normalize sorts the intervals and merges the overlapping and adjacent ones. Pure.
func normalize(in []Interval) []Interval {
	if len(in) == 0 {
		return nil
	}
	s := append([]Interval(nil), in...)
	sort.Slice(s, func(i, j int) bool { return s[i].First < s[j].First })
	out := []Interval{s[0]}
	for _, iv := range s[1:] {
		last := &out[len(out)-1]
		if uint64(iv.First) <= uint64(last.Last)+1 {
			if iv.Last > last.Last {
				last.Last = iv.Last
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// subtract is base minus the cut intervals (both any order). Pure.
func subtract(base []Interval, cut []Interval) []Interval {
	base, cut = normalize(base), normalize(cut)
	var out []Interval
	for _, b := range base {
		cur := b
		alive := true
		for _, c := range cut {
			if !alive || c.Last < cur.First {
				continue
			}
			if c.First > cur.Last {
				break
			}
			if c.First > cur.First {
				out = append(out, Interval{cur.First, c.First - 1})
			}
			if c.Last >= cur.Last {
				alive = false
				break
			}
			cur.First = c.Last + 1
		}
		if alive {
			out = append(out, cur)
		}
	}
	return out
}

// contains reports whether u is in the normalized intervals.
func contains(ivs []Interval, u uint32) bool {
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].Last >= u })
	return i < len(ivs) && ivs[i].First <= u
}
