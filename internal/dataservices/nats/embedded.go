package nats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EmbeddedOptions configure the embedded server.
type EmbeddedOptions struct {
	// Dir holds the JetStream store (Dir/jetstream) and the admin password (Dir/admin-password).
	Dir string
	// Host is the listen address, 127.0.0.1 unless set.
	Host string
	// Port is the client port; 0 picks a free one.
	Port int
	// Log receives the server's log.
	Log *slog.Logger
}

// Embedded is an in-process NATS JetStream server.
type Embedded struct {
	o        EmbeddedOptions
	password string
	dir      *Directory
	srv      *server.Server

	ready    chan struct{}
	readyErr error
	once     sync.Once
}

// NewEmbedded prepares the server: it creates Dir and reads (or generates and keeps) the admin
// password. Nothing listens until Start.
func NewEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded nats: no directory")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	pw, err := adminPassword(filepath.Join(o.Dir, "admin-password"))
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	return &Embedded{o: o, password: pw, dir: NewDirectory(pw), ready: make(chan struct{})}, nil
}

func adminPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	pw := RandomPassword()
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", err
	}
	return pw, nil
}

// RandomPassword is 32 random bytes, hex.
func RandomPassword() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// Start runs the server until ctx ends, then shuts it down and returns. Ready tells when it
// accepts connections.
func (e *Embedded) Start(ctx context.Context) error {
	err := e.start(ctx)
	e.once.Do(func() { e.readyErr = err; close(e.ready) })
	if err != nil {
		return err
	}
	<-ctx.Done()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	return nil
}

func (e *Embedded) start(ctx context.Context) error {
	port := e.o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName:                 "kube-embedded",
		Host:                       e.o.Host,
		Port:                       port,
		HTTPPort:                   0,
		NoSigs:                     true,
		JetStream:                  true,
		StoreDir:                   filepath.Join(e.o.Dir, "jetstream"),
		CustomClientAuthentication: e.dir,
		DisableJetStreamBanner:     true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	srv.SetLoggerV2(slogLogger{e.o.Log}, false, false, false)
	e.srv = srv
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return errors.New("embedded nats: not ready for connections after 30s")
	}
	if err := e.watchDirectory(ctx); err != nil {
		srv.Shutdown()
		return err
	}
	return nil
}

// watchDirectory loads UsersBucket and follows it for as long as ctx lasts; it returns once
// the current users are loaded.
func (e *Embedded) watchDirectory(ctx context.Context) error {
	nc, err := natsgo.Connect("", natsgo.InProcessServer(e.srv), natsgo.UserInfo(AdminUser, e.password),
		natsgo.Name("kube-embedded-directory"), natsgo.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("embedded nats: directory connection: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("embedded nats: %w", err)
	}
	kv, err := ensureUsersBucket(ctx, js)
	if err != nil {
		nc.Close()
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		nc.Close()
		return fmt.Errorf("embedded nats: watch %s: %w", UsersBucket, err)
	}
	loaded := make(chan struct{})
	go func() {
		defer nc.Close()
		defer w.Stop()
		initial := true
		for {
			select {
			case <-ctx.Done():
				return
			case ent, ok := <-w.Updates():
				if !ok {
					return
				}
				if ent == nil {
					if initial {
						initial = false
						close(loaded)
					}
					continue
				}
				switch ent.Operation() {
				case jetstream.KeyValuePut:
					if err := e.dir.Put(ent.Key(), ent.Value()); err != nil {
						e.o.Log.Warn("embedded nats: bad directory record", "err", err)
					}
				default:
					e.dir.Delete(ent.Key())
				}
			}
		}
	}()
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ensureUsersBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: UsersBucket, Description: "Kube's NATS users (internal/dataservices/nats)", History: 1,
		Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: users bucket: %w", err)
	}
	return kv, nil
}

// Ready is closed once the server accepts connections (or failed to start: see Err).
func (e *Embedded) Ready() <-chan struct{} { return e.ready }

// Err is why Start failed, after Ready is closed.
func (e *Embedded) Err() error { <-e.ready; return e.readyErr }

// Addr is the client listener's address, after Ready.
func (e *Embedded) Addr() string {
	a, ok := e.srv.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	return net.JoinHostPort(e.o.Host, strconv.Itoa(a.Port))
}

// URL is the admin URL (nats://kube-admin:password@host:port), after Ready.
func (e *Embedded) URL() string {
	u := url.URL{Scheme: "nats", User: url.UserPassword(AdminUser, e.password), Host: e.Addr()}
	return u.String()
}
