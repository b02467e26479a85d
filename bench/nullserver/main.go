// Command nullserver is an API server that does no work beyond the HTTP transport: the
// ceiling any server could reach on this machine with the clients of bench/apibench and
// bench/crdbench (P2), against which their store-ratio goals can be read.
//
// It serves HTTPS on 127.0.0.1:-port with Go's net/http (HTTP/2 through ALPN h2) and Kube's
// own PKI and TLS configuration (internal/pki: CA, serving certificate, client certificates
// verified), made fresh in a scratch directory, and writes a kubeconfig (-kubeconfig) with
// the admin client certificate. It answers only the requests those
// two programs send, with the least work that still decodes on the client:
//
//   - create (POST) of namespaces, configmaps, CRDs and custom resources: 201 and the request
//     body echoed, in the request's Content-Type;
//   - update (PUT) of a configmap: 200 and the body echoed;
//   - get of a configmap and list of configmaps: one configmap, or a list of 500, encoded once
//     at start in protobuf and JSON, sent in protobuf when the Accept header allows it.
//
// Nothing is stored, checked or assigned (no uid, resourceVersion or defaults). Any other
// request gets a 404 Status and is logged once per method and path. It prints the kubeconfig
// path and "ready" when serving and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"kubeos.dev/kube/internal/pki"
)

func main() {
	port := flag.Int("port", 26843, "HTTPS port on 127.0.0.1")
	kubeconfig := flag.String("kubeconfig", "", "where to write the kubeconfig for clients (required)")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "nullserver: -kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	addr := fmt.Sprintf("127.0.0.1:%d", *port)
	// Kube's own PKI and TLS configuration, in a scratch directory: the same CA, serving
	// certificate, client-certificate check and ALPN as `kube server`.
	dir, err := os.MkdirTemp("", "nullserver-pki-")
	check(err)
	defer os.RemoveAll(dir)
	p, err := pki.Ensure(pki.Options{Dir: dir})
	check(err)
	check(pki.WriteKubeconfig(*kubeconfig, "https://"+addr, p.CAPEM, p.AdminCertPEM, p.AdminKeyPEM, pki.AdminUser))
	tlsConfig, err := p.ServingTLSConfig()
	check(err)
	api, err := newNullAPI()
	check(err)
	ln, err := net.Listen("tcp", addr)
	check(err)
	srv := &http.Server{Handler: api.routes(), TLSConfig: tlsConfig}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Printf("kubeconfig %s\nready\n", *kubeconfig)
	if err := srv.ServeTLS(ln, "", ""); err != http.ErrServerClosed {
		check(err)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "nullserver:", err)
		os.Exit(1)
	}
}
