package api

import (
	"crypto/tls"
	"net/url"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"
)

// TestHTTP2Settings: the secure port announces kube-apiserver's HTTP/2 limits in its
// SETTINGS frame: 100 concurrent streams per connection (a client opens another connection
// beyond them) and a 256 KiB window and frame size per stream, not Go's defaults (250
// streams, 1 MiB).
func TestHTTP2Settings(t *testing.T) {
	apiSuite.Need(t)
	cfg := adminConfig(t)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.NextProtos = []string{http2.NextProtoTLS}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		t.Fatalf("ALPN negotiated %q, want h2", p)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // a hung server fails the test instead of hanging it
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	settings, ok := f.(*http2.SettingsFrame)
	if !ok || settings.IsAck() {
		t.Fatalf("first frame from the server: %v, want SETTINGS", f)
	}
	want := map[http2.SettingID]uint32{
		http2.SettingMaxConcurrentStreams: 100,
		http2.SettingInitialWindowSize:    256 << 10,
		http2.SettingMaxFrameSize:         256 << 10,
	}
	for id, v := range want {
		if got, ok := settings.Value(id); !ok || got != v {
			t.Errorf("%v = %d (sent: %v), want %d", id, got, ok, v)
		}
	}
}
