package proxy

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Names of the fixed chains and maps.
const (
	rejectChain   = "reject-chain"
	servicesChain = "services"

	mapServiceIPs    = "service-ips"
	mapNodePorts     = "service-nodeports"
	mapNoEndpointIPs = "no-endpoint-services"
	mapNoEndpointNPs = "no-endpoint-nodeports"
	setHairpin       = "hairpin"
)

// programmer owns the table in the kernel and remembers what it programmed there.
type programmer struct {
	conn   *nftables.Conn
	table  *nftables.Table
	nodeIP netip.Addr
	// guardBridge is the bridge of the loopback guard (loopback.go); "" for none.
	guardBridge string

	maps map[string]*nftables.Set

	// What the kernel holds (after the first apply): per-service chains' content, affinity
	// sets, and the verdict maps' elements.
	known         bool
	chains        map[string]string
	affinity      map[string]uint32
	dnatMaps      map[string][]addrPort // nil value: the map exists, its content is unknown
	hairpin       map[netip.Addr]bool   // nil: unknown (flushed and refilled)
	serviceIPs    map[ipKey]verdict
	nodePorts     map[portKey]verdict
	noEndpointIPs map[ipKey]verdict
	noEndpointNPs map[portKey]verdict
}

func newProgrammer(table string, nodeIP netip.Addr, guardBridge string) (*programmer, error) {
	conn, err := nftables.New(nftables.WithSockOptions(bigBuffers))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNFTables, err)
	}
	return &programmer{conn: conn, table: &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}, nodeIP: nodeIP,
		guardBridge: guardBridge}, nil
}

// transactionBuffer is the netlink socket's send and receive buffer: a first sync of
// 1,000 Services x 10 endpoints is one transaction of ~10 MB (and as many ACKs).
const transactionBuffer = 128 << 20

// bigBuffers raises the socket's buffers past net.core.[rw]mem_max (SO_*BUFFORCE, root).
func bigBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, transactionBuffer); e != nil {
			serr = e
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, transactionBuffer)
	})
	if err != nil {
		return err
	}
	return serr
}

// setup makes the table, its base chains and maps, and (re)writes the base chains' fixed
// rules, in one transaction; what a previous run left in the table stays until the first
// apply replaces it. A loopback guard of a previous run for another bridge (or none now)
// goes, and that bridge's route_localnet is turned off first.
func (p *programmer) setup() error {
	c := p.conn
	if ok, err := hasChain(c, p.table, guardChain); err == nil && ok {
		if old := guardedBridge(c, p.table); old != "" && old != p.guardBridge {
			if _, err := setRouteLocalnet(old, false); err != nil {
				return err
			}
		}
		if p.guardBridge == "" {
			c.DelChain(&nftables.Chain{Name: guardChain, Table: p.table})
		}
	}
	c.AddTable(p.table)
	concat := func(types ...nftables.SetDatatype) nftables.SetDatatype {
		t, _ := nftables.ConcatSetType(types...)
		return t
	}
	ipProtoPort := concat(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	protoPort := concat(nftables.TypeInetProto, nftables.TypeInetService)
	p.maps = map[string]*nftables.Set{
		mapServiceIPs:    {Table: p.table, Name: mapServiceIPs, IsMap: true, Concatenation: true, KeyType: ipProtoPort, DataType: nftables.TypeVerdict},
		mapNodePorts:     {Table: p.table, Name: mapNodePorts, IsMap: true, Concatenation: true, KeyType: protoPort, DataType: nftables.TypeVerdict},
		mapNoEndpointIPs: {Table: p.table, Name: mapNoEndpointIPs, IsMap: true, Concatenation: true, KeyType: ipProtoPort, DataType: nftables.TypeVerdict},
		mapNoEndpointNPs: {Table: p.table, Name: mapNoEndpointNPs, IsMap: true, Concatenation: true, KeyType: protoPort, DataType: nftables.TypeVerdict},
	}
	p.maps[setHairpin] = &nftables.Set{Table: p.table, Name: setHairpin, Concatenation: true, KeyType: concat(nftables.TypeIPAddr, nftables.TypeIPAddr)}
	for _, name := range []string{mapServiceIPs, mapNodePorts, mapNoEndpointIPs, mapNoEndpointNPs, setHairpin} {
		if err := c.AddSet(p.maps[name], nil); err != nil {
			return fmt.Errorf("proxy: map %s: %w", name, err)
		}
	}
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		ch := &nftables.Chain{Name: name, Table: p.table}
		if hook != nil {
			ch.Type, ch.Hooknum, ch.Priority = typ, hook, prio
		}
		c.AddChain(ch)
		c.FlushChain(ch)
		return ch
	}
	prio := func(v int32) *nftables.ChainPriority { return nftables.ChainPriorityRef(nftables.ChainPriority(v)) }
	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: p.table, Chain: ch, Exprs: all})
	}
	one := func(e expr.Any) []expr.Any { return []expr.Any{e} }

	reject := chain(rejectChain, "", nil, nil)
	// TCP gets a reset (a local connect sees ECONNREFUSED at once), the rest ICMP
	// port-unreachable.
	rule(reject, []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})
	rule(reject, one(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3 /* port unreachable */}))

	// Endpoint checks before DNAT: only reject verdicts are in these maps.
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"filter-prerouting-pre-dnat", nftables.ChainHookPrerouting}, {"filter-output-pre-dnat", nftables.ChainHookOutput}} {
		ch := chain(h.name, nftables.ChainTypeFilter, h.hook, prio(-110))
		rule(ch, ctStateNew(), daddrProtoPortVmap(p.maps[mapNoEndpointIPs]))
		if p.nodeIP.IsValid() {
			rule(ch, ctStateNew(), daddrIs(p.nodeIP), protoPortVmap(p.maps[mapNoEndpointNPs]))
		}
	}
	if p.guardBridge != "" {
		guard := chain(guardChain, nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
		rule(guard, guardExprs(p.guardBridge))
	}
	services := chain(servicesChain, "", nil, nil)
	rule(services, daddrProtoPortVmap(p.maps[mapServiceIPs]))
	if p.nodeIP.IsValid() {
		rule(services, daddrIs(p.nodeIP), protoPortVmap(p.maps[mapNodePorts]))
	}
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"nat-prerouting", nftables.ChainHookPrerouting}, {"nat-output", nftables.ChainHookOutput}} {
		ch := chain(h.name, nftables.ChainTypeNAT, h.hook, prio(-100))
		rule(ch, one(&expr.Verdict{Kind: expr.VerdictJump, Chain: servicesChain}))
	}
	post := chain("nat-postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, prio(100))
	// Hairpin: a pod DNATed to itself (ip saddr . ip daddr @hairpin) is masqueraded.
	rule(post, []expr.Any{ipSaddr(reg9), ipDaddr(reg10),
		&expr.Lookup{SourceRegister: reg9, SetName: setHairpin, SetID: p.maps[setHairpin].ID}}, markOr())
	rule(post, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(masqMark), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictReturn},
	})
	rule(post, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^uint32(0)), Xor: binaryutil.NativeEndian.PutUint32(masqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1},
		&expr.Masq{FullyRandom: true},
	})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("%w: table %s: %v", ErrNoNFTables, p.table.Name, err)
	}
	return nil
}

// fixedChains are setup's, never deleted by apply.
var fixedChains = map[string]bool{rejectChain: true, servicesChain: true, "filter-prerouting-pre-dnat": true,
	"filter-output-pre-dnat": true, "nat-prerouting": true, "nat-output": true, "nat-postrouting": true, guardChain: true}

// loadKnown reads which per-service chains and affinity sets the table holds (a previous
// run's, or after a failed transaction), so that apply rewrites them all.
func (p *programmer) loadKnown() error {
	p.chains, p.affinity = map[string]string{}, map[string]uint32{}
	chains, err := p.conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("proxy: list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == p.table.Name && !fixedChains[ch.Name] {
			p.chains[ch.Name] = "?" // unknown content: rewritten
		}
	}
	sets, err := p.conn.GetSets(p.table)
	if err != nil {
		return fmt.Errorf("proxy: list sets: %w", err)
	}
	p.dnatMaps, p.hairpin = map[string][]addrPort{}, nil
	for _, s := range sets {
		if strings.HasPrefix(s.Name, "aff-") {
			p.affinity[s.Name] = 0 // unknown timeout: recreated when wanted
		}
		if strings.HasPrefix(s.Name, "epm-") {
			p.dnatMaps[s.Name] = nil // unknown content: flushed and refilled when wanted
		}
	}
	p.serviceIPs, p.nodePorts, p.noEndpointIPs, p.noEndpointNPs = nil, nil, nil, nil
	p.known = true
	return nil
}

// applyStats counts what one apply changed.
type applyStats struct {
	chainsWritten, chainsDeleted, elementsChanged int
}

// apply makes the table hold d, sending only differences, in one transaction. On error
// nothing changed in the kernel and the next apply starts from the kernel's content again.
func (p *programmer) apply(d *desired) (applyStats, error) {
	var st applyStats
	if !p.known {
		if err := p.loadKnown(); err != nil {
			return st, err
		}
	}
	c := p.conn
	full := p.serviceIPs == nil // first apply since loadKnown: maps are flushed and refilled

	// Affinity sets first (rules refer to them); a set's name carries its timeout.
	for name, timeout := range d.affinity {
		if _, ok := p.affinity[name]; ok {
			continue
		}
		s := &nftables.Set{Table: p.table, Name: name, KeyType: nftables.TypeIPAddr, HasTimeout: true, Dynamic: true,
			Timeout: time.Duration(timeout) * time.Second}
		if err := c.AddSet(s, nil); err != nil {
			return st, err
		}
	}
	// DNAT maps, before the chains that use them: new maps made, every index below the
	// wanted count set (so a chain's new modulus never points past its map); the indices
	// beyond it go in the last transaction, after the chains.
	var surplus []func() error
	for name, want := range d.dnatMaps {
		old, exists := p.dnatMaps[name]
		m := p.dnatMap(name)
		if !exists {
			if err := c.AddSet(m, nil); err != nil {
				return st, err
			}
		} else if old == nil {
			c.FlushSet(m)
		}
		var del, add []nftables.SetElement
		for i, ep := range want {
			if i < len(old) && old[i] == ep {
				continue
			}
			if i < len(old) {
				del = append(del, nftables.SetElement{Key: indexKey(i)})
			}
			add = append(add, nftables.SetElement{Key: indexKey(i), Val: addrPortBytes(ep)})
		}
		var gone []nftables.SetElement
		for i := len(want); i < len(old); i++ {
			gone = append(gone, nftables.SetElement{Key: indexKey(i)})
		}
		st.elementsChanged += len(add) + len(gone)
		if err := setElements(c, m, del, add); err != nil {
			return st, err
		}
		if len(gone) > 0 {
			surplus = append(surplus, func() error { return setElements(c, m, gone, nil) })
		}
	}
	// Hairpin pairs: added now, removed at the end.
	var hairpinGone []nftables.SetElement
	{
		hs := p.maps[setHairpin]
		old := p.hairpin
		if old == nil {
			c.FlushSet(hs)
		}
		var add []nftables.SetElement
		for a := range d.hairpin {
			if !old[a] {
				add = append(add, nftables.SetElement{Key: pairKey(a)})
			}
		}
		for a := range old {
			if !d.hairpin[a] {
				hairpinGone = append(hairpinGone, nftables.SetElement{Key: pairKey(a)})
			}
		}
		st.elementsChanged += len(add) + len(hairpinGone)
		if err := setElements(c, hs, nil, add); err != nil {
			return st, err
		}
	}
	// The changed chains' content, referenced chains first (ep- before svc-/svl- before
	// int-/ext-), committed in chunks of chunkChains: a chain nothing refers to yet is
	// inert, so only the maps' elements and the deletions (the last transaction) switch
	// traffic. A kernel transaction of ~40,000 messages (1,000 Services x 10 endpoints) is
	// slow to build and send at once, hence the chunks.
	var todo []string
	for name := range d.chains {
		if old, ok := p.chains[name]; !ok || old != d.contents[name] {
			todo = append(todo, name)
		}
	}
	sort.Slice(todo, func(i, j int) bool {
		ri, rj := chainRank(todo[i]), chainRank(todo[j])
		if ri != rj {
			return ri < rj
		}
		return todo[i] < todo[j]
	})
	written := map[string]string{}
	commit := func(what string) error {
		if err := c.Flush(); err != nil {
			p.known = false
			return fmt.Errorf("proxy: nftables transaction (%s): %w", what, err)
		}
		for name, content := range written {
			p.chains[name] = content
		}
		clear(written)
		return nil
	}
	for i, name := range todo {
		rules := d.chains[name]
		ch := &nftables.Chain{Name: name, Table: p.table}
		if _, ok := p.chains[name]; ok {
			c.FlushChain(ch)
		} else {
			c.AddChain(ch)
		}
		for _, r := range rules {
			exprs, err := p.ruleExprs(r)
			if err != nil {
				return st, err
			}
			c.AddRule(&nftables.Rule{Table: p.table, Chain: ch, Exprs: exprs})
		}
		written[name] = d.contents[name]
		st.chainsWritten++
		if (i+1)%chunkChains == 0 {
			if err := commit(fmt.Sprintf("chains %d-%d", i+1-chunkChains, i)); err != nil {
				return st, err
			}
		}
	}
	// Map elements.
	n, err := syncMap(c, p.maps[mapServiceIPs], full, p.serviceIPs, d.serviceIPs, ipKeyBytes)
	st.elementsChanged += n
	if err != nil {
		return st, err
	}
	for _, m := range []struct {
		set       *nftables.Set
		old, want map[portKey]verdict
	}{{p.maps[mapNodePorts], p.nodePorts, d.nodePorts}, {p.maps[mapNoEndpointNPs], p.noEndpointNPs, d.noEndpointNPs}} {
		n, err := syncMap(c, m.set, full, m.old, m.want, portKeyBytes)
		st.elementsChanged += n
		if err != nil {
			return st, err
		}
	}
	n, err = syncMap(c, p.maps[mapNoEndpointIPs], full, p.noEndpointIPs, d.noEndpointIPs, ipKeyBytes)
	st.elementsChanged += n
	if err != nil {
		return st, err
	}
	// Chains and sets no longer wanted: flushed first (they may refer to each other).
	var gone []string
	for name := range p.chains {
		if _, ok := d.chains[name]; !ok {
			gone = append(gone, name)
			c.FlushChain(&nftables.Chain{Name: name, Table: p.table})
		}
	}
	for _, name := range gone {
		c.DelChain(&nftables.Chain{Name: name, Table: p.table})
		st.chainsDeleted++
	}
	for _, f := range surplus {
		if err := f(); err != nil {
			return st, err
		}
	}
	if err := setElements(c, p.maps[setHairpin], hairpinGone, nil); err != nil {
		return st, err
	}
	var goneMaps []string
	for name := range p.dnatMaps {
		if _, ok := d.dnatMaps[name]; !ok {
			goneMaps = append(goneMaps, name)
			c.DelSet(&nftables.Set{Table: p.table, Name: name})
		}
	}
	var goneSets []string
	for name := range p.affinity {
		if _, ok := d.affinity[name]; !ok {
			goneSets = append(goneSets, name)
			c.DelSet(&nftables.Set{Table: p.table, Name: name})
		}
	}
	if err := commit("maps and deletions"); err != nil {
		return st, err
	}
	for _, name := range gone {
		delete(p.chains, name)
	}
	for name, t := range d.affinity {
		p.affinity[name] = t
	}
	for _, name := range goneSets {
		delete(p.affinity, name)
	}
	for name, want := range d.dnatMaps {
		p.dnatMaps[name] = want
	}
	for _, name := range goneMaps {
		delete(p.dnatMaps, name)
	}
	p.hairpin = maps.Clone(d.hairpin)
	// d is the caller's (buildDesiredCached's, changed in place next time): copies.
	p.serviceIPs, p.nodePorts = maps.Clone(d.serviceIPs), maps.Clone(d.nodePorts)
	p.noEndpointIPs, p.noEndpointNPs = maps.Clone(d.noEndpointIPs), maps.Clone(d.noEndpointNPs)
	return st, nil
}

// elementsPerMessage bounds one set-element message (see syncMap).
const elementsPerMessage = 256

// chunkChains is how many chains one transaction writes at most.
const chunkChains = 2000

// chainRank orders chains so that a chain is written after those it refers to.
func chainRank(name string) int {
	switch {
	case strings.HasPrefix(name, "ep-"):
		return 0
	case strings.HasPrefix(name, "svc-"), strings.HasPrefix(name, "svl-"):
		return 1
	}
	return 2
}

func chainContent(rules []rule) string {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// syncMap queues the element changes from old to want (all of want after a flush when full).
func syncMap[K comparable](c *nftables.Conn, set *nftables.Set, full bool, old, want map[K]verdict, key func(K) []byte) (int, error) {
	var del, add []nftables.SetElement
	if full {
		c.FlushSet(set)
		old = nil
	}
	for k, v := range old {
		if w, ok := want[k]; !ok || w != v {
			del = append(del, nftables.SetElement{Key: key(k)})
		}
	}
	for k, v := range want {
		if o, ok := old[k]; !ok || o != v {
			add = append(add, nftables.SetElement{Key: key(k), VerdictData: verdictExpr(v)})
		}
	}
	changed := len(del) + len(add)
	// One message's element list is a netlink attribute, whose length is 16 bits: at most
	// elementsPerMessage elements per message (~90 bytes each).
	for len(del) > 0 {
		n := min(len(del), elementsPerMessage)
		if err := c.SetDeleteElements(set, del[:n]); err != nil {
			return 0, err
		}
		del = del[n:]
	}
	for len(add) > 0 {
		n := min(len(add), elementsPerMessage)
		if err := c.SetAddElements(set, add[:n]); err != nil {
			return 0, err
		}
		add = add[n:]
	}
	return changed, nil
}

// ruleExprs is r in netlink form; numgen rules add their anonymous vmap to the transaction.
func (p *programmer) ruleExprs(r rule) ([]expr.Any, error) {
	cat := func(parts ...[]expr.Any) []expr.Any {
		var all []expr.Any
		for _, e := range parts {
			all = append(all, e...)
		}
		return all
	}
	one := func(e ...expr.Any) []expr.Any { return e }
	switch r.kind {
	case rMarkIfSrcNotIn:
		return cat(prefixMatch(r.prefix, expr.CmpOpNeq), markOr()), nil
	case rMark:
		return markOr(), nil
	case rMarkIfSrc:
		a := r.addr.As4()
		return cat(one(ipSaddr(reg1), &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: a[:]}), markOr()), nil
	case rGotoIfSrcIn:
		return cat(prefixMatch(r.prefix, expr.CmpOpEq), one(gotoChain(r.chain))), nil
	case rMarkIfSrcLocal:
		return cat(fibSaddrLocal(), markOr()), nil
	case rGotoIfSrcLocal:
		return cat(fibSaddrLocal(), one(gotoChain(r.chain))), nil
	case rGotoIfInSet:
		return one(ipSaddr(reg1), &expr.Lookup{SourceRegister: reg1, SetName: r.set}, gotoChain(r.chain)), nil
	case rUpdateSet:
		return one(ipSaddr(reg1), &expr.Dynset{SrcRegKey: reg1, SetName: r.set, Operation: unix.NFT_DYNSET_OP_UPDATE}), nil
	case rNumgen:
		s := &nftables.Set{Table: p.table, Anonymous: true, Constant: true, IsMap: true, KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
		elems := make([]nftables.SetElement, len(r.chains))
		for i, ch := range r.chains {
			elems[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), VerdictData: gotoChain(ch)}
		}
		if err := p.conn.AddSet(s, elems); err != nil {
			return nil, err
		}
		return one(&expr.Numgen{Register: reg1, Modulus: uint32(len(r.chains)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: reg1, SetName: s.Name, SetID: s.ID, DestRegister: 0, IsDestRegSet: true}), nil
	case rGoto:
		return one(gotoChain(r.chain)), nil
	case rDNAT:
		a := r.addr.As4()
		return one(
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{r.proto}},
			&expr.Immediate{Register: reg1, Data: a[:]},
			&expr.Immediate{Register: reg2, Data: binaryutil.BigEndian.PutUint16(r.port)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1, RegProtoMin: reg2, Specified: true},
		), nil
	case rDrop:
		return one(&expr.Verdict{Kind: expr.VerdictDrop}), nil
	case rDNATMap:
		m := p.dnatMap(r.set)
		return one(
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{r.proto}},
			&expr.Numgen{Register: reg1, Modulus: r.mod, Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: reg1, SetName: m.Name, SetID: m.ID, DestRegister: reg9, IsDestRegSet: true},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg9, RegProtoMin: reg10, Specified: true},
		), nil
	}
	return nil, errors.New("proxy: unknown rule kind")
}

// addrPortType is the DNAT maps' data: ipv4_addr . inet_service.
var addrPortType, _ = nftables.ConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)

// dnatMap is the DNAT map name (index → endpoint address . port).
func (p *programmer) dnatMap(name string) *nftables.Set {
	return &nftables.Set{Table: p.table, Name: name, IsMap: true, KeyType: nftables.TypeInteger, DataType: addrPortType}
}

// indexKey is numgen's value i (host byte order, as the register holds it).
func indexKey(i int) []byte { return binaryutil.NativeEndian.PutUint32(uint32(i)) }

// addrPortBytes is ep as a concatenation: the address, the port in network order padded to 4.
func addrPortBytes(ep addrPort) []byte {
	a := ep.addr.As4()
	return []byte{a[0], a[1], a[2], a[3], byte(ep.port >> 8), byte(ep.port), 0, 0}
}

// pairKey is a . a (ip saddr . ip daddr of hairpin traffic).
func pairKey(a netip.Addr) []byte {
	b := a.As4()
	return []byte{b[0], b[1], b[2], b[3], b[0], b[1], b[2], b[3]}
}

// setElements queues deletions then additions, elementsPerMessage per message.
func setElements(c *nftables.Conn, set *nftables.Set, del, add []nftables.SetElement) error {
	for len(del) > 0 {
		n := min(len(del), elementsPerMessage)
		if err := c.SetDeleteElements(set, del[:n]); err != nil {
			return err
		}
		del = del[n:]
	}
	for len(add) > 0 {
		n := min(len(add), elementsPerMessage)
		if err := c.SetAddElements(set, add[:n]); err != nil {
			return err
		}
		add = add[n:]
	}
	return nil
}
