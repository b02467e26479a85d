package server

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 settings of the secure port, kube-apiserver's (k8s.io/apiserver's
// SecureServingInfo.Serve with --http2-max-streams-per-connection at its default 0).
const (
	// http2MaxStreams is the number of streams a client may have open on one connection:
	// kube-apiserver's 100 (client-go opens another connection beyond it), not Go's 250.
	// It bounds how many of one connection's requests wait on the connection's single
	// serve loop and in the filters at a time.
	http2MaxStreams = 100
	// http2StreamBuffer is the receive window and largest frame of one stream: 256 KiB
	// holds 99 % of API request bodies in one frame (upstream's survey), against Go's
	// 1 MiB per stream. The connection's window is that times http2MaxStreams.
	http2StreamBuffer = 256 << 10
	// idleTimeout closes idle connections after 90 s, http.DefaultTransport's keep-alive.
	idleTimeout = 90 * time.Second
)

// newHTTPServer is the secure port's server: HTTP/1.1 and HTTP/2 over tlsConfig with
// kube-apiserver's limits (header size, timeouts, HTTP/2 streams and buffers).
func newHTTPServer(handler http.Handler, tlsConfig *tls.Config) (*http.Server, error) {
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
	}
	err := http2.ConfigureServer(srv, &http2.Server{
		IdleTimeout:                  idleTimeout,
		MaxConcurrentStreams:         http2MaxStreams,
		MaxReadFrameSize:             http2StreamBuffer,
		MaxUploadBufferPerStream:     http2StreamBuffer,
		MaxUploadBufferPerConnection: http2StreamBuffer * http2MaxStreams,
	})
	if err != nil {
		return nil, fmt.Errorf("HTTP/2: %w", err)
	}
	return srv, nil
}
