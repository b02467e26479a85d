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
)

// Listener serves a Handler on one address over UDP and TCP.
type Listener struct {
	h   *Handler
	pc  net.PacketConn
	tcp *dns.Server
}

// Listen binds addr (host:port) over UDP and TCP, on the same port; Serve answers on it.
func Listen(addr string, h *Handler) (*Listener, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("dns: listen udp %s: %w", addr, err)
	}
	// The same port over TCP (port 0 picked one for UDP).
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("dns: listen tcp %s: %w", addr, err)
	}
	return &Listener{h: h, pc: pc,
		tcp: &dns.Server{Listener: l, Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second},
	}, nil
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

// serveUDP reads queries with a few goroutines (no goroutine per packet: the socket is
// bound to one address, so plain reads and writes do, without the control messages a
// wildcard socket needs). Names the index answers are answered in the reading goroutine;
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

func (l *Listener) readLoop() error {
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, addr, err := l.pc.ReadFrom(buf)
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
		family := "1"
		if ua, ok := addr.(*net.UDPAddr); ok && ua.IP.To4() == nil {
			family = "2"
		}
		req := new(dns.Msg)
		if err := req.Unpack(buf[:n]); err != nil {
			if b := formatError(buf[:n]); b != nil {
				_, _ = l.pc.WriteTo(b, addr)
			}
			continue
		}
		if req.Response {
			continue
		}
		if !l.h.local(req) {
			go func() { _, _ = l.pc.WriteTo(l.h.respond(req, true, family, start), addr) }()
			continue
		}
		_, _ = l.pc.WriteTo(l.h.respond(req, true, family, start), addr)
	}
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
