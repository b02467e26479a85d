package simnode

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
)

// parseRange reads an IPv4 CIDR as its first address and size.
func parseRange(cidr string) (base uint32, size uint64, err error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return 0, 0, err
	}
	if !p.Addr().Is4() {
		return 0, 0, fmt.Errorf("%s: only IPv4 ranges are simulated", cidr)
	}
	p = p.Masked()
	return ip4(p.Addr()), 1 << (32 - p.Bits()), nil
}

func ip4(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

func ipString(v uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b).String()
}

// podRange hands out a node's pod addresses: offsets 2 … size-2 of its range (offset 1
// is the bridge's, as host-local IPAM leaves it), at most 256 addresses.
type podRange struct {
	base uint32
	size uint32
	used [4]uint64
}

func newPodRange(cidr string) (podRange, error) {
	base, size, err := parseRange(cidr)
	if err != nil {
		return podRange{}, err
	}
	return podRange{base: base, size: uint32(min(size, 256))}, nil
}

// contains tells whether ip is one this range hands out.
func (r *podRange) contains(ip uint32) bool {
	return ip-r.base >= 2 && ip-r.base < r.size-1
}

// take marks ip used (an address a pod already has).
func (r *podRange) take(ip uint32) {
	if r.contains(ip) {
		o := ip - r.base
		r.used[o/64] |= 1 << (o % 64)
	}
}

// release frees ip.
func (r *podRange) release(ip uint32) {
	if r.contains(ip) {
		o := ip - r.base
		r.used[o/64] &^= 1 << (o % 64)
	}
}

// allocate takes the lowest free address; 0 when the range is full.
func (r *podRange) allocate() uint32 {
	for w := range r.used {
		free := ^r.used[w]
		if w == 0 {
			free &^= 3 // offsets 0 and 1
		}
		for free != 0 {
			b := uint32(bits.TrailingZeros64(free))
			o := uint32(w)*64 + b
			if o >= r.size-1 {
				return 0
			}
			r.used[w] |= 1 << b
			return r.base + o
		}
	}
	return 0
}
