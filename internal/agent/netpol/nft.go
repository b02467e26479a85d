package netpol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// The names inside our table.
const (
	forwardChain = "forward"
	ingressMap   = "ingress"
	egressMap    = "egress"
)

// Table is our nftables table, programmed from Programs. Not safe for concurrent use.
type Table struct {
	name    string
	conn    []nftables.ConnOption
	applied *Program // nil: the next Sync replaces the table
	sets    map[string]*nftables.Set
	ingress *nftables.Set
	egress  *nftables.Set
}

// NewTable is the table name (family ip) in the network namespace opts give (default
// the process's); nothing is programmed until Sync.
func NewTable(name string, opts ...nftables.ConnOption) *Table {
	return &Table{name: name, conn: append([]nftables.ConnOption{nftables.WithSockOptions(bigBuffers)}, opts...)}
}

// bufferBytes is the netlink socket's buffer size: the kernel acknowledges every message
// of a transaction, and a whole-table transaction has thousands.
const bufferBytes = 64 << 20

// bigBuffers raises the socket's receive and send buffers past the sysctl limits (we are
// root), else as far as they allow.
func bigBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bufferBytes),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, bufferBytes))
	}); err != nil {
		return err
	}
	if serr != nil {
		_ = c.SetReadBuffer(bufferBytes)
		_ = c.SetWriteBuffer(bufferBytes)
	}
	return nil
}

func (t *Table) table() *nftables.Table {
	return &nftables.Table{Name: t.name, Family: nftables.TableFamilyIPv4}
}

// Sync programs prog: the first time (and after a failure) the whole table in one
// transaction replacing the old one, then only the difference from the last Program.
func (t *Table) Sync(prog Program) error {
	c, err := nftables.New(t.conn...)
	if err != nil {
		return fmt.Errorf("netpol: nftables: %w", err)
	}
	if t.applied == nil {
		err = t.replace(c, prog)
	} else {
		err = t.update(c, prog)
	}
	if err == nil {
		err = c.Flush()
	}
	if err != nil {
		t.applied = nil
		return fmt.Errorf("netpol: nftables table %s: %w", t.name, err)
	}
	t.applied = &prog
	return nil
}

// Cleanup deletes the table (nothing when it does not exist): tests, `kube agent --cleanup`.
// A netlink transaction is not cancellable; ctx is checked before it starts.
func Cleanup(ctx context.Context, table string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return cleanupIn(table)
}

func cleanupIn(table string, opts ...nftables.ConnOption) error {
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("netpol: nftables: %w", err)
	}
	tb := &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}
	c.AddTable(tb)
	c.DelTable(tb)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netpol: delete table %s: %w", table, err)
	}
	return nil
}

// replace queues: delete the table, make it again with everything in prog.
func (t *Table) replace(c *nftables.Conn, prog Program) error {
	tb := t.table()
	c.AddTable(tb)
	c.DelTable(tb)
	c.AddTable(tb)
	t.sets = map[string]*nftables.Set{}
	t.ingress = &nftables.Set{Table: tb, Name: ingressMap, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	t.egress = &nftables.Set{Table: tb, Name: egressMap, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	for _, s := range []*nftables.Set{t.ingress, t.egress} {
		if err := c.AddSet(s, nil); err != nil {
			return err
		}
	}
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: forwardChain, Table: tb, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: established()})
	c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: dispatch(t.egress, 12)})
	c.AddRule(&nftables.Rule{Table: tb, Chain: fwd, Exprs: dispatch(t.ingress, 16)})
	empty := Program{Sets: map[string][]Interval{}, Pods: map[netip.Addr]PodProgram{}}
	return t.apply(c, empty, prog)
}

// update queues the difference from the applied Program to prog.
func (t *Table) update(c *nftables.Conn, prog Program) error {
	return t.apply(c, *t.applied, prog)
}

// apply queues what turns old into new, in an order the kernel accepts in one
// transaction: sets first, then chains, then the maps' elements; removals last.
func (t *Table) apply(c *nftables.Conn, old, new Program) error {
	tb := t.table()
	for _, name := range sortedKeys(new.Sets) {
		ivs := new.Sets[name]
		s, ok := t.sets[name]
		if !ok {
			s = &nftables.Set{Table: tb, Name: name, Interval: true, KeyType: nftables.TypeIPAddr}
			if err := c.AddSet(s, intervalElements(ivs)); err != nil {
				return fmt.Errorf("set %s: %w", name, err)
			}
			t.sets[name] = s
			continue
		}
		removed, added := diffIntervals(old.Sets[name], ivs)
		if len(removed) > 0 {
			if err := c.SetDeleteElements(s, intervalElements(removed)); err != nil {
				return fmt.Errorf("set %s: %w", name, err)
			}
		}
		if len(added) > 0 {
			if err := c.SetAddElements(s, intervalElements(added)); err != nil {
				return fmt.Errorf("set %s: %w", name, err)
			}
		}
	}
	oldChains, newChains := podChains(old), podChains(new)
	var mapAdd, mapDel []chainSpec
	for _, name := range sortedKeys(newChains) {
		spec := newChains[name]
		ch := &nftables.Chain{Name: name, Table: tb}
		prev, ok := oldChains[name]
		switch {
		case !ok:
			c.AddChain(ch)
			mapAdd = append(mapAdd, spec)
		case reflect.DeepEqual(prev.rules, spec.rules):
			continue
		default:
			c.FlushChain(ch)
		}
		for _, exprs := range t.chainRules(spec) {
			c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: exprs})
		}
	}
	for _, name := range sortedKeys(oldChains) {
		if _, ok := newChains[name]; !ok {
			mapDel = append(mapDel, oldChains[name])
		}
	}
	for _, spec := range mapAdd {
		m := t.dirMap(spec.ingress)
		if err := c.SetAddElements(m, []nftables.SetElement{{Key: addrBytes(spec.ip), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: spec.name}}}); err != nil {
			return err
		}
	}
	for _, spec := range mapDel {
		m := t.dirMap(spec.ingress)
		if err := c.SetDeleteElements(m, []nftables.SetElement{{Key: addrBytes(spec.ip), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: spec.name}}}); err != nil {
			return err
		}
	}
	for _, spec := range mapDel {
		ch := &nftables.Chain{Name: spec.name, Table: tb}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	for _, name := range sortedKeys(old.Sets) {
		if _, ok := new.Sets[name]; !ok {
			c.DelSet(t.sets[name])
			delete(t.sets, name)
		}
	}
	return nil
}

func (t *Table) dirMap(ingress bool) *nftables.Set {
	if ingress {
		return t.ingress
	}
	return t.egress
}

// chainSpec is one pod chain: in-<ip> or eg-<ip>.
type chainSpec struct {
	name    string
	ip      netip.Addr
	ingress bool
	rules   []Rule
}

func podChains(p Program) map[string]chainSpec {
	out := map[string]chainSpec{}
	for ip, pp := range p.Pods {
		if pp.Ingress != nil {
			n := "in-" + ip.String()
			out[n] = chainSpec{n, ip, true, pp.Ingress.Rules}
		}
		if pp.Egress != nil {
			n := "eg-" + ip.String()
			out[n] = chainSpec{n, ip, false, pp.Egress.Rules}
		}
	}
	return out
}

// chainRules is a pod chain's rules: the pod itself (through a Service) first, then one
// rule per allow rule and port range (accept for ingress; return for egress, so that the
// destination's ingress chain decides next), then refuse: TCP with a reset, the rest with
// ICMP administratively prohibited.
func (t *Table) chainRules(spec chainSpec) [][]expr.Any {
	peerOff, verdict := uint32(12), expr.VerdictAccept // ingress: the peer is the source
	if !spec.ingress {
		peerOff, verdict = 16, expr.VerdictReturn
	}
	var out [][]expr.Any
	out = append(out, append(loadAddr(peerOff), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addrBytes(spec.ip)}, &expr.Verdict{Kind: verdict}))
	for _, r := range spec.rules {
		var peer []expr.Any
		if r.Set != "" {
			s := t.sets[r.Set]
			peer = append(loadAddr(peerOff), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
		}
		if len(r.Ports) == 0 {
			out = append(out, append(append([]expr.Any{}, peer...), &expr.Verdict{Kind: verdict}))
			continue
		}
		for _, pr := range r.Ports {
			e := append(append([]expr.Any{}, peer...), portMatch(pr)...)
			out = append(out, append(e, &expr.Verdict{Kind: verdict}))
		}
	}
	out = append(out,
		[]expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}},
		[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 13}},
	)
	return out
}

func loadAddr(offset uint32) []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}
}

func protoNumber(p corev1.Protocol) byte {
	switch p {
	case corev1.ProtocolUDP:
		return unix.IPPROTO_UDP
	case corev1.ProtocolSCTP:
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
}

// portMatch is `meta l4proto P [th dport first-last]`.
func portMatch(pr PortRange) []expr.Any {
	e := []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumber(pr.Protocol)}}}
	if pr.AnyPort() {
		return e
	}
	e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
	if pr.First == pr.Last {
		return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(pr.First)})
	}
	return append(e, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binaryutil.BigEndian.PutUint16(pr.First), ToData: binaryutil.BigEndian.PutUint16(pr.Last)})
}

// established is `ct state established,related accept`.
func established() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}

// dispatch is `ip saddr|daddr vmap @m`.
func dispatch(m *nftables.Set, offset uint32) []expr.Any {
	return append(loadAddr(offset), &expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: m.Name, SetID: m.ID})
}

func addrBytes(a netip.Addr) []byte { b := a.As4(); return b[:] }

func u32Bytes(u uint32) []byte { return binary.BigEndian.AppendUint32(nil, u) }

// intervalElements is the interval set elements of ivs: a start, and an end one past the
// last address (none when the interval reaches 255.255.255.255).
func intervalElements(ivs []Interval) []nftables.SetElement {
	var out []nftables.SetElement
	for _, iv := range ivs {
		out = append(out, nftables.SetElement{Key: u32Bytes(iv.First)})
		if iv.Last != math.MaxUint32 {
			out = append(out, nftables.SetElement{Key: u32Bytes(iv.Last + 1), IntervalEnd: true})
		}
	}
	return out
}

// diffIntervals is what leaves and what comes from old to new (whole intervals). Pure.
func diffIntervals(old, new []Interval) (removed, added []Interval) {
	in := func(s []Interval) map[Interval]bool {
		m := map[Interval]bool{}
		for _, iv := range s {
			m[iv] = true
		}
		return m
	}
	o, n := in(old), in(new)
	for _, iv := range old {
		if !n[iv] {
			removed = append(removed, iv)
		}
	}
	for _, iv := range new {
		if !o[iv] {
			added = append(added, iv)
		}
	}
	return removed, added
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
