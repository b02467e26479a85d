package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Listener serves a Handler on one address over UDP and TCP.
type Listener struct {
	h   *Handler
	pc  net.PacketConn
	tcp *dns.Server
}

// Listen binds addr (host:port) over UDP and TCP, on the same port; Serve answers on it.
// Port 0 picks one free for both.
func Listen(addr string, h *Handler) (*Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("dns: listen udp %s: %w", addr, err)
		}
		// The same port over TCP (port 0 picked one for UDP).
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			if port == "0" && attempt < 10 {
				continue // the UDP port picked is taken over TCP: pick another
			}
			return nil, fmt.Errorf("dns: listen tcp %s: %w", addr, err)
		}
		return &Listener{h: h, pc: pc,
			tcp: &dns.Server{Listener: l, Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second},
		}, nil
	}
}

// Addr is the UDP address bound (port 0 picks one).
func (l *Listener) Addr() net.Addr { return l.pc.LocalAddr() }

// TCPAddr is the TCP address bound.
func (l *Listener) TCPAddr() net.Addr { return l.tcp.Listener.Addr() }

// Serve answers until ctx ends, then closes the sockets.
func (l *Listener) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- l.tcp.ActivateAndServe() }()
	go func() { errc <- l.serveUDP() }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.tcp.ShutdownContext(sctx)
	_ = l.pc.Close()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// serveUDP reads queries with a few goroutines, up to batchSize datagrams per
// recvmmsg(2) and the answers in one sendmmsg(2) (no goroutine per packet; the socket is
// bound to one address, so no control messages as a wildcard socket needs them). Names the index answers are answered in the reading goroutine;
// the rest, which wait on an upstream server, each in a goroutine of their own.
func (l *Listener) serveUDP() error {
	workers := max(2, runtime.GOMAXPROCS(0))
	errc := make(chan error, workers)
	for range workers {
		go func() { errc <- l.readLoop() }()
	}
	var first error
	for range workers {
		if err := <-errc; err != nil && first == nil {
			first = err
			_ = l.pc.Close()
		}
	}
	return first
}

// batchSize is how many datagrams one recvmmsg(2)/sendmmsg(2) moves at most.
const batchSize = 32

// batchConn is ipv4.PacketConn or ipv6.PacketConn: recvmmsg and sendmmsg.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func (l *Listener) readLoop() error {
	uc, ok := l.pc.(*net.UDPConn)
	if !ok {
		return errors.New("dns: udp: not a UDP socket")
	}
	var bc batchConn = ipv4.NewPacketConn(uc)
	if a, ok := uc.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		bc = ipv6.NewPacketConn(uc)
	}
	in := make([]ipv4.Message, batchSize)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, dns.MaxMsgSize)}
	}
	out := make([]ipv4.Message, 0, batchSize)
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("dns: udp: %w", err)
		}
		start := time.Now()
		out = out[:0]
		for _, m := range in[:n] {
			if b := l.datagram(m.Buffers[0][:m.N], m.Addr, start); b != nil {
				out = append(out, ipv4.Message{Buffers: [][]byte{b}, Addr: m.Addr})
			}
		}
		for len(out) > 0 {
			k, err := bc.WriteBatch(out, 0)
			if err != nil || k == 0 {
				break
			}
			out = out[k:]
		}
	}
}

// datagram answers one UDP query: the reply to send now, or nil (nothing to send, or
// sent later by the goroutine that waits on the upstream).
func (l *Listener) datagram(pkt []byte, addr net.Addr, start time.Time) []byte {
	family := "1"
	if ua, ok := addr.(*net.UDPAddr); ok && ua.IP.To4() == nil {
		family = "2"
	}
	req := new(dns.Msg)
	if err := req.Unpack(pkt); err != nil {
		return formatError(pkt)
	}
	if req.Response {
		return nil
	}
	if !l.h.local(req) {
		go func() { _, _ = l.pc.WriteTo(l.h.respond(req, true, family, start), addr) }()
		return nil
	}
	return l.h.respond(req, true, family, start)
}

// formatError is the FORMERR reply to a packet that does not parse but has a query's
// header (nil: no reply, as for responses and runts).
func formatError(pkt []byte) []byte {
	if len(pkt) < 12 || pkt[2]&0x80 != 0 {
		return nil
	}
	b := make([]byte, 12)
	copy(b, pkt[:2])
	b[2] = 0x80 | pkt[2]&0x78 | pkt[2]&0x01 // QR, the opcode, RD
	b[3] = 0x80 | dns.RcodeFormatError      // RA
	return b
}

// ServeMetrics serves g's metrics at http://addr/metrics until ctx ends (CoreDNS's
// :9153 on the DNS address).
func ServeMetrics(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dns: metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dns: metrics: %w", err)
	}
	return nil
}
