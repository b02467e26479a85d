package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	k8sproxy "k8s.io/kubernetes/pkg/proxy"
)

// The desired content of the table, computed from the trackers' maps (pure: no I/O).

// verdictKind is what a verdict-map element does.
type verdictKind int

const (
	vGoto verdictKind = iota
	vReject
	vDrop
)

type verdict struct {
	kind  verdictKind
	chain string // vGoto
}

func (v verdict) String() string {
	switch v.kind {
	case vReject:
		return "goto reject-chain"
	case vDrop:
		return "drop"
	}
	return "goto " + v.chain
}

// ipKey is an element key of @service-ips and @no-endpoint-services.
type ipKey struct {
	ip    netip.Addr
	proto uint8
	port  uint16
}

// portKey is an element key of @service-nodeports and @no-endpoint-nodeports.
type portKey struct {
	proto uint8
	port  uint16
}

// ruleKind names the few rule shapes the per-service chains use.
type ruleKind int

const (
	rMarkIfSrcNotIn ruleKind = iota // ip saddr != prefix: mark for masquerade
	rMark                           // mark for masquerade
	rMarkIfSrc                      // ip saddr == addr: mark for masquerade (hairpin)
	rGotoIfSrcIn                    // ip saddr prefix goto chain
	rMarkIfSrcLocal                 // fib saddr type local: mark for masquerade
	rGotoIfSrcLocal                 // fib saddr type local goto chain
	rGotoIfInSet                    // ip saddr @set goto chain (affinity)
	rUpdateSet                      // update @set { ip saddr } (affinity)
	rNumgen                         // numgen random mod len(chains) vmap { i: goto chains[i] }
	rGoto                           // goto chain
	rDNAT                           // meta l4proto proto dnat to addr:port
	rDrop                           // drop
	rDNATMap                        // meta l4proto proto dnat ip to numgen random mod mod map @set
)

type rule struct {
	kind   ruleKind
	prefix netip.Prefix
	addr   netip.Addr
	port   uint16
	proto  uint8
	chain  string
	chains []string
	set    string
	mod    uint32
}

// String is the rule in nft's syntax (near enough); a chain's rules' strings are what
// tells a changed chain from an unchanged one.
func (r rule) String() string {
	switch r.kind {
	case rMarkIfSrcNotIn:
		return fmt.Sprintf("ip saddr != %s meta mark set mark or 0x%x", r.prefix, masqMark)
	case rMark:
		return fmt.Sprintf("meta mark set mark or 0x%x", masqMark)
	case rMarkIfSrc:
		return fmt.Sprintf("ip saddr %s meta mark set mark or 0x%x", r.addr, masqMark)
	case rGotoIfSrcIn:
		return fmt.Sprintf("ip saddr %s goto %s", r.prefix, r.chain)
	case rMarkIfSrcLocal:
		return fmt.Sprintf("fib saddr type local meta mark set mark or 0x%x", masqMark)
	case rGotoIfSrcLocal:
		return "fib saddr type local goto " + r.chain
	case rGotoIfInSet:
		return fmt.Sprintf("ip saddr @%s goto %s", r.set, r.chain)
	case rUpdateSet:
		return fmt.Sprintf("update @%s { ip saddr }", r.set)
	case rNumgen:
		parts := make([]string, len(r.chains))
		for i, c := range r.chains {
			parts[i] = fmt.Sprintf("%d : goto %s", i, c)
		}
		return fmt.Sprintf("numgen random mod %d vmap { %s }", len(r.chains), strings.Join(parts, ", "))
	case rGoto:
		return "goto " + r.chain
	case rDNAT:
		return fmt.Sprintf("meta l4proto %d dnat ip to %s:%d", r.proto, r.addr, r.port)
	case rDrop:
		return "drop"
	case rDNATMap:
		return fmt.Sprintf("meta l4proto %d dnat ip to numgen random mod %d map @%s", r.proto, r.mod, r.set)
	}
	return fmt.Sprintf("rule kind %d", r.kind)
}

// masqMark is the packet-mark bit that nat-postrouting masquerades (upstream's).
const masqMark = 0x4000

// desired is the table's content apart from its fixed base chains.
type desired struct {
	chains        map[string][]rule
	contents      map[string]string     // chain → chainContent(its rules)
	dnatMaps      map[string][]addrPort // map name → the endpoints numgen picks from, by index
	hairpin       map[netip.Addr]bool   // endpoints of the DNAT maps: saddr . daddr of hairpin traffic
	affinity      map[string]uint32     // set name → timeout seconds
	serviceIPs    map[ipKey]verdict
	nodePorts     map[portKey]verdict
	noEndpointIPs map[ipKey]verdict
	noEndpointNPs map[portKey]verdict
	clusterIPs    map[netip.Addr]bool
	report        []portReport
}

// addrPort is an endpoint a DNAT map's element points to.
type addrPort struct {
	addr netip.Addr
	port uint16
}

// portReport is one Service port as /debug/services shows it.
type portReport struct {
	Service     string   `json:"service"`
	ClusterIP   string   `json:"clusterIP"`
	Port        int      `json:"port"`
	Protocol    string   `json:"protocol"`
	NodePort    int      `json:"nodePort,omitempty"`
	ExternalIPs []string `json:"externalIPs,omitempty"`
	Affinity    int      `json:"sessionAffinitySeconds,omitempty"`
	Internal    string   `json:"internalTraffic"`
	External    string   `json:"externalTraffic,omitempty"`
	Cluster     []string `json:"clusterEndpoints"`
	Local       []string `json:"localEndpoints,omitempty"`
	Chain       string   `json:"chain"`
}

// plan is what one Service port does on this node (upstream nftables proxier's choices).
type plan struct {
	cluster, local []k8sproxy.Endpoint
	// hasEndpoints: the Service has usable endpoints somewhere in the cluster.
	hasEndpoints bool
	// usesCluster / usesLocal: the svc- / svl- chain is programmed.
	usesCluster, usesLocal bool
	// internal / external: where ClusterIP / NodePort-externalIP traffic goes when it has
	// an endpoint; filter verdicts otherwise (reject: no endpoints at all; drop: endpoints
	// exist but none for this traffic's policy).
	hasInternal, hasExternal bool
	internalFilter           *verdict
	externalFilter           *verdict
}

// The no-endpoint maps hold only reject verdicts (checked before DNAT, as nothing of such a
// port is DNATed); drops are the last rule of the int-/ext- chains, after the
// short-circuits of policy Local.

// planPort chooses the endpoints of one Service port for node (pure; the endpoint choice
// itself is upstream's CategorizeEndpoints: ready, else serving-terminating, per policy).
func planPort(svc k8sproxy.ServicePort, eps []k8sproxy.Endpoint, node string) plan {
	var p plan
	p.cluster, p.local, _, p.hasEndpoints = k8sproxy.CategorizeEndpoints(eps, svc, node, nil)
	p.usesCluster = len(p.cluster) > 0 && svc.UsesClusterEndpoints()
	p.usesLocal = len(p.local) > 0 && svc.UsesLocalEndpoints()
	p.hasInternal = p.hasEndpoints
	if svc.InternalPolicyLocal() && len(p.local) == 0 {
		p.hasInternal = false
	}
	p.hasExternal = p.hasEndpoints
	if svc.ExternalPolicyLocal() && len(p.local) == 0 {
		p.hasExternal = false
	}
	switch {
	case !p.hasEndpoints:
		p.internalFilter, p.externalFilter = &verdict{kind: vReject}, &verdict{kind: vReject}
	default:
		if !p.hasInternal {
			p.internalFilter = &verdict{kind: vDrop}
		}
		if !p.hasExternal {
			p.externalFilter = &verdict{kind: vDrop}
		}
	}
	return p
}

func hashName(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return strings.ToLower(base32.StdEncoding.EncodeToString(h[:10]))
}

func protoNum(p v1.Protocol) uint8 {
	switch p {
	case v1.ProtocolUDP:
		return 17
	case v1.ProtocolSCTP:
		return 132
	}
	return 6
}

func newDesired() *desired {
	return &desired{chains: map[string][]rule{}, contents: map[string]string{}, dnatMaps: map[string][]addrPort{},
		hairpin: map[netip.Addr]bool{}, affinity: map[string]uint32{}, serviceIPs: map[ipKey]verdict{},
		nodePorts: map[portKey]verdict{}, noEndpointIPs: map[ipKey]verdict{}, noEndpointNPs: map[portKey]verdict{},
		clusterIPs: map[netip.Addr]bool{}}
}

// portCache keeps each Service port's part of the desired content (buildPort's), reused
// while the port's ServicePort and endpoint slice are the same objects (the trackers
// replace both for a changed Service only), and the merged content of all parts, updated
// by the changed parts only: a sync costs what changed, not what exists.
type portCache struct {
	ports map[k8sproxy.ServicePortName]cachedPort
	d     *desired
	order []k8sproxy.ServicePortName // ports sorted by name; nil when ports came or went
	// refs count the parts holding an address (several ports share a ClusterIP; several
	// Services an endpoint).
	hairpinRefs, clusterIPRefs map[netip.Addr]int
}

type cachedPort struct {
	svc  k8sproxy.ServicePort
	eps  []k8sproxy.Endpoint
	part *desired
}

func newPortCache() *portCache {
	return &portCache{ports: map[k8sproxy.ServicePortName]cachedPort{}, d: newDesired(),
		hairpinRefs: map[netip.Addr]int{}, clusterIPRefs: map[netip.Addr]int{}}
}

func sameEndpoints(a, b []k8sproxy.Endpoint) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// buildDesired computes the whole desired content (pure).
func buildDesired(svcs k8sproxy.ServicePortMap, eps k8sproxy.EndpointsMap, node string, o parsed) *desired {
	return buildDesiredCached(svcs, eps, node, o, newPortCache())
}

// buildDesiredCached is buildDesired reusing (and updating) cache. The result is cache's
// own merged content: valid until the next call, not to be kept (copy what must be).
func buildDesiredCached(svcs k8sproxy.ServicePortMap, eps k8sproxy.EndpointsMap, node string, o parsed, cache *portCache) *desired {
	for name, c := range cache.ports {
		if _, ok := svcs[name]; !ok {
			cache.unmerge(c.part)
			delete(cache.ports, name)
			cache.order = nil
		}
	}
	for name, svc := range svcs {
		list := eps[name]
		c, ok := cache.ports[name]
		if ok && c.svc == svc && sameEndpoints(c.eps, list) {
			continue
		}
		if ok {
			cache.unmerge(c.part)
		} else {
			cache.order = nil
		}
		c = cachedPort{svc: svc, eps: list, part: buildPort(name, svc, list, node, o)}
		cache.ports[name] = c
		cache.merge(c.part)
	}
	if cache.order == nil {
		// The report's order (by name), computed again only when ports come or go.
		keys := make(map[k8sproxy.ServicePortName]string, len(svcs))
		for name := range svcs {
			cache.order = append(cache.order, name)
			keys[name] = name.String()
		}
		sort.Slice(cache.order, func(i, j int) bool { return keys[cache.order[i]] < keys[cache.order[j]] })
	}
	d := cache.d
	d.report = d.report[:0]
	for _, name := range cache.order {
		d.report = append(d.report, cache.ports[name].part.report...)
	}
	return d
}

// merge adds part (one port's content) to the merged content.
func (c *portCache) merge(part *desired) {
	d := c.d
	for k, v := range part.chains {
		d.chains[k] = v
		d.contents[k] = part.contents[k]
	}
	for k, v := range part.affinity {
		d.affinity[k] = v
	}
	for k, v := range part.dnatMaps {
		d.dnatMaps[k] = v
	}
	for k, v := range part.serviceIPs {
		d.serviceIPs[k] = v
	}
	for k, v := range part.nodePorts {
		d.nodePorts[k] = v
	}
	for k, v := range part.noEndpointIPs {
		d.noEndpointIPs[k] = v
	}
	for k, v := range part.noEndpointNPs {
		d.noEndpointNPs[k] = v
	}
	for a := range part.hairpin {
		c.hairpinRefs[a]++
		d.hairpin[a] = true
	}
	for a := range part.clusterIPs {
		c.clusterIPRefs[a]++
		d.clusterIPs[a] = true
	}
}

// unmerge takes part (merged before) out of the merged content.
func (c *portCache) unmerge(part *desired) {
	d := c.d
	for k := range part.chains {
		delete(d.chains, k)
		delete(d.contents, k)
	}
	for k := range part.affinity {
		delete(d.affinity, k)
	}
	for k := range part.dnatMaps {
		delete(d.dnatMaps, k)
	}
	for k := range part.serviceIPs {
		delete(d.serviceIPs, k)
	}
	for k := range part.nodePorts {
		delete(d.nodePorts, k)
	}
	for k := range part.noEndpointIPs {
		delete(d.noEndpointIPs, k)
	}
	for k := range part.noEndpointNPs {
		delete(d.noEndpointNPs, k)
	}
	for a := range part.hairpin {
		if c.hairpinRefs[a]--; c.hairpinRefs[a] <= 0 {
			delete(c.hairpinRefs, a)
			delete(d.hairpin, a)
		}
	}
	for a := range part.clusterIPs {
		if c.clusterIPRefs[a]--; c.clusterIPRefs[a] <= 0 {
			delete(c.clusterIPRefs, a)
			delete(d.clusterIPs, a)
		}
	}
}

// buildPort computes one Service port's part of the desired content (pure).
func buildPort(name k8sproxy.ServicePortName, svc k8sproxy.ServicePort, eps []k8sproxy.Endpoint, node string, o parsed) *desired {
	d := newDesired()
	defer func() {
		for k, rules := range d.chains {
			d.contents[k] = chainContent(rules)
		}
	}()
	cip, ok := netip.AddrFromSlice(svc.ClusterIP().To4())
	if !ok {
		return d
	}
	h := hashName(name.String(), string(svc.Protocol()))
	proto := protoNum(svc.Protocol())
	port := uint16(svc.Port())
	p := planPort(svc, eps, node)
	affinity := 0
	if svc.SessionAffinityType() == v1.ServiceAffinityClientIP {
		affinity = svc.StickyMaxAgeSeconds()
	}
	intChain, extChain, svcChain, svlChain := "int-"+h, "ext-"+h, "svc-"+h, "svl-"+h
	rep := portReport{Service: name.String(), ClusterIP: cip.String(), Port: svc.Port(), Protocol: string(svc.Protocol()),
		NodePort: svc.NodePort(), Affinity: affinity, Chain: intChain}
	d.clusterIPs[cip] = true

	// Endpoint chains, shared by svc- and svl-.
	epChain := func(ep k8sproxy.Endpoint) string {
		return "ep-" + hashName(name.String(), string(svc.Protocol()), ep.String())
	}
	affSet := func(ep k8sproxy.Endpoint) string {
		return "aff-" + hashName(name.String(), string(svc.Protocol()), ep.String(), fmt.Sprint(affinity))
	}
	addEP := func(ep k8sproxy.Endpoint) {
		c := epChain(ep)
		if _, done := d.chains[c]; done {
			return
		}
		addr, err := netip.ParseAddr(ep.IP())
		if err != nil || !addr.Is4() {
			return
		}
		rules := []rule{{kind: rMarkIfSrc, addr: addr}}
		if affinity > 0 {
			d.affinity[affSet(ep)] = uint32(affinity)
			rules = append(rules, rule{kind: rUpdateSet, set: affSet(ep)})
		}
		d.chains[c] = append(rules, rule{kind: rDNAT, proto: proto, addr: addr, port: uint16(ep.Port())})
	}
	policyChain := func(chain string, list []k8sproxy.Endpoint) {
		if affinity == 0 {
			// No per-endpoint chains: one DNAT through a map of the endpoints, so an
			// endpoint replaced is a map element changed (no rule changes, so the kernel
			// does not revalidate the whole table); hairpin traffic is masqueraded by
			// the table's @hairpin lookup instead.
			var targets []addrPort
			for _, ep := range list {
				addr, err := netip.ParseAddr(ep.IP())
				if err != nil || !addr.Is4() {
					continue
				}
				targets = append(targets, addrPort{addr: addr, port: uint16(ep.Port())})
				d.hairpin[addr] = true
			}
			if len(targets) == 0 {
				return
			}
			m := "epm-" + chain
			d.dnatMaps[m] = targets
			d.chains[chain] = []rule{{kind: rDNATMap, proto: proto, mod: uint32(len(targets)), set: m}}
			return
		}
		var rules []rule
		var chains []string
		for _, ep := range list {
			addEP(ep)
			if _, ok := d.chains[epChain(ep)]; !ok {
				continue
			}
			chains = append(chains, epChain(ep))
			if affinity > 0 {
				rules = append(rules, rule{kind: rGotoIfInSet, set: affSet(ep), chain: epChain(ep)})
			}
		}
		if len(chains) == 0 {
			return
		}
		d.chains[chain] = append(rules, rule{kind: rNumgen, chains: chains})
	}
	if p.usesCluster {
		policyChain(svcChain, p.cluster)
	}
	if p.usesLocal {
		policyChain(svlChain, p.local)
	}
	for _, ep := range p.cluster {
		rep.Cluster = append(rep.Cluster, ep.String())
	}
	for _, ep := range p.local {
		rep.Local = append(rep.Local, ep.String())
	}
	internalPolicy, externalPolicy := svcChain, svcChain
	if svc.InternalPolicyLocal() {
		internalPolicy = svlChain
	}
	if svc.ExternalPolicyLocal() {
		externalPolicy = svlChain
	}

	// ClusterIP.
	ck := ipKey{ip: cip, proto: proto, port: port}
	switch {
	case o.apiServer.IsValid() && isAPIServerPort(name, svc):
		// The API server listens on loopback only: its listed endpoints (the host's
		// public address) would refuse the connection (loopback.go). No masquerade
		// mark: the reply comes back to this node whatever the source.
		d.chains[intChain] = []rule{{kind: rDNAT, proto: proto, addr: o.apiServer.Addr(), port: o.apiServer.Port()}}
		d.serviceIPs[ck] = verdict{chain: intChain}
		rep.Internal = "loopback API server " + o.apiServer.String()
	case p.hasInternal:
		var rules []rule
		if o.clusterCIDR.IsValid() {
			rules = append(rules, rule{kind: rMarkIfSrcNotIn, prefix: o.clusterCIDR})
		}
		d.chains[intChain] = append(rules, rule{kind: rGoto, chain: internalPolicy})
		d.serviceIPs[ck] = verdict{chain: intChain}
		rep.Internal = internalPolicy
	case p.internalFilter.kind == vDrop:
		// Endpoints exist, none for this node's policy: drop in the nat chain.
		d.chains[intChain] = []rule{{kind: rDrop}}
		d.serviceIPs[ck] = verdict{chain: intChain}
		rep.Internal = "drop"
	default:
		d.noEndpointIPs[ck] = *p.internalFilter
		rep.Internal = p.internalFilter.String()
	}

	// NodePort and externalIPs.
	var externals []netip.Addr
	for _, ip := range svc.ExternalIPs() {
		if a, ok := netip.AddrFromSlice(ip.To4()); ok {
			externals = append(externals, a)
			rep.ExternalIPs = append(rep.ExternalIPs, a.String())
		}
	}
	if len(externals) == 0 && svc.NodePort() == 0 {
		d.report = append(d.report, rep)
		return d
	}
	if p.hasEndpoints {
		var rules []rule
		if svc.ExternalPolicyLocal() {
			if p.usesCluster && o.clusterCIDR.IsValid() {
				rules = append(rules, rule{kind: rGotoIfSrcIn, prefix: o.clusterCIDR, chain: svcChain})
			}
			rules = append(rules, rule{kind: rMarkIfSrcLocal})
			if p.usesCluster {
				rules = append(rules, rule{kind: rGotoIfSrcLocal, chain: svcChain})
			}
		} else {
			rules = append(rules, rule{kind: rMark})
		}
		if p.hasExternal {
			rules = append(rules, rule{kind: rGoto, chain: externalPolicy})
		} else {
			// What was not short-circuited has no endpoint for policy Local.
			rules = append(rules, rule{kind: rDrop})
		}
		d.chains[extChain] = rules
		rep.External = externalPolicy
	}
	if p.externalFilter != nil {
		rep.External = p.externalFilter.String()
	}
	for _, a := range externals {
		k := ipKey{ip: a, proto: proto, port: port}
		if p.hasEndpoints {
			d.serviceIPs[k] = verdict{chain: extChain}
		}
		if !p.hasEndpoints {
			d.noEndpointIPs[k] = *p.externalFilter
		}
	}
	if np := svc.NodePort(); np != 0 {
		k := portKey{proto: proto, port: uint16(np)}
		if p.hasEndpoints {
			d.nodePorts[k] = verdict{chain: extChain}
		}
		if !p.hasEndpoints {
			d.noEndpointNPs[k] = *p.externalFilter
		}
	}
	d.report = append(d.report, rep)
	return d
}
