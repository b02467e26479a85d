package proxy

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The nftables expressions of the rule shapes (the netlink form of nft's syntax).

// 32-bit registers 9, 10, 11 hold a concatenation's fields (NFT_REG32_00..02).
const (
	reg1  = 1
	reg2  = 2
	reg9  = 9
	reg10 = 10
	reg11 = 11
)

func ipSaddr(reg uint32) *expr.Payload {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
}

func ipDaddr(reg uint32) *expr.Payload {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
}

func ctStateNew() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: reg1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: []byte{0, 0, 0, 0}},
	}
}

// daddrProtoPortVmap: ip daddr . meta l4proto . th dport vmap @set.
func daddrProtoPortVmap(set *nftables.Set) []expr.Any {
	return []expr.Any{
		ipDaddr(reg9),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg10},
		&expr.Payload{DestRegister: reg11, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: reg9, SetName: set.Name, SetID: set.ID, DestRegister: 0, IsDestRegSet: true},
	}
}

// daddrIs: ip daddr == a.
func daddrIs(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{ipDaddr(reg1), &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: b[:]}}
}

// protoPortVmap: meta l4proto . th dport vmap @set.
func protoPortVmap(set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg9},
		&expr.Payload{DestRegister: reg10, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: reg9, SetName: set.Name, SetID: set.ID, DestRegister: 0, IsDestRegSet: true},
	}
}

func markOr() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^uint32(masqMark)), Xor: binaryutil.NativeEndian.PutUint32(masqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1},
	}
}

func prefixMatch(p netip.Prefix, op expr.CmpOp) []expr.Any {
	addr := p.Masked().Addr().As4()
	var mask [4]byte
	bits := p.Bits()
	for i := 0; i < 4; i++ {
		switch {
		case bits >= 8:
			mask[i] = 0xff
			bits -= 8
		case bits > 0:
			mask[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	return []expr.Any{
		ipSaddr(reg1),
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: mask[:], Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: op, Register: reg1, Data: addr[:]},
	}
}

func fibSaddrLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: reg1, FlagSADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

func gotoChain(c string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: c} }

// verdictExpr is the map element verdict of v.
func verdictExpr(v verdict) *expr.Verdict {
	switch v.kind {
	case vReject:
		return gotoChain(rejectChain)
	case vDrop:
		return &expr.Verdict{Kind: expr.VerdictDrop}
	}
	return gotoChain(v.chain)
}

func ipKeyBytes(k ipKey) []byte {
	a := k.ip.As4()
	return []byte{a[0], a[1], a[2], a[3], k.proto, 0, 0, 0, byte(k.port >> 8), byte(k.port), 0, 0}
}

func portKeyBytes(k portKey) []byte {
	return []byte{k.proto, 0, 0, 0, byte(k.port >> 8), byte(k.port), 0, 0}
}
