package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Listener serves a Handler on one address over UDP and TCP.
type Listener struct {
	udp, tcp *dns.Server
}

// Listen binds addr (host:port) over UDP and TCP, on the same port; Serve answers on it.
func Listen(addr string, h dns.Handler) (*Listener, error) {
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
	return &Listener{
		udp: &dns.Server{PacketConn: pc, Handler: h, UDPSize: dns.MaxMsgSize},
		tcp: &dns.Server{Listener: l, Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second},
	}, nil
}

// Addr is the UDP address bound (port 0 picks one).
func (l *Listener) Addr() net.Addr { return l.udp.PacketConn.LocalAddr() }

// TCPAddr is the TCP address bound.
func (l *Listener) TCPAddr() net.Addr { return l.tcp.Listener.Addr() }

// Serve answers until ctx ends, then closes the sockets.
func (l *Listener) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	for _, s := range []*dns.Server{l.udp, l.tcp} {
		go func() { errc <- s.ActivateAndServe() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.udp.ShutdownContext(sctx)
	_ = l.tcp.ShutdownContext(sctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
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
