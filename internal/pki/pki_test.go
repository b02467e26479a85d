package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func ensure(t testing.TB, o Options) *PKI {
	t.Helper()
	p, err := Ensure(o)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return p
}

func mustCert(t testing.TB, path string) *x509.Certificate {
	t.Helper()
	c, _, err := readCert(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func serial(t testing.TB, path string) string { return mustCert(t, path).SerialNumber.String() }

// TestFrontProxyCA: a CA of its own (not the cluster CA), kept across starts, whose client
// certificate is front-proxy-client and verifies only against it.
func TestFrontProxyCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p := ensure(t, Options{Dir: dir})
	if p.FrontProxy == nil || p.FrontProxy.CA.Subject.CommonName != FrontProxyCACommonName || p.FrontProxy.CA.Equal(p.CA) {
		t.Fatalf("front-proxy CA %+v", p.FrontProxy)
	}
	certPEM, _, err := p.FrontProxyClient()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != FrontProxyClientName {
		t.Errorf("CN %q", cert.Subject.CommonName)
	}
	verify := func(ca *x509.Certificate) error {
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(p.FrontProxy.CA); err != nil {
		t.Errorf("against the front-proxy CA: %v", err)
	}
	if err := verify(p.CA); err == nil {
		t.Error("the proxy certificate verifies against the cluster CA")
	}
	again := ensure(t, Options{Dir: dir})
	if !again.FrontProxy.CA.Equal(p.FrontProxy.CA) {
		t.Error("the front-proxy CA changed across starts")
	}
}

func TestEnsureFirstStartModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ensure(t, Options{Dir: dir})

	modes := map[string]os.FileMode{
		CACertName: 0o644, CAKeyName: 0o600,
		ServingCertName: 0o644, ServingKeyName: 0o600,
		AdminCertName: 0o644, AdminKeyName: 0o600,
		ServiceAccountKeyName: 0o600, ServiceAccountPubName: 0o644,
		FrontProxyCACertName: 0o644, FrontProxyCAKeyName: 0o600,
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	var want []string
	for n := range modes {
		want = append(want, n)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("files = %v, want %v", names, want)
	}
	for name, mode := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, want 0700", fi.Mode().Perm())
	}
}

func TestEnsureTightensModesAndCleansTemp(t *testing.T) {
	dir := t.TempDir()
	ensure(t, Options{Dir: dir})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, CAKeyName), 0o644); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, ".serving.key"+tmpInfix+"123")
	if err := os.WriteFile(leftover, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	ensure(t, Options{Dir: dir})
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, CAKeyName): 0o600} {
		if fi, _ := os.Stat(path); fi.Mode().Perm() != want {
			t.Errorf("%s mode = %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temp file still there: %v", err)
	}
}

func TestEnsureReusesAndRenews(t *testing.T) {
	base := time.Now()
	at := func(d time.Duration) func() time.Time { return func() time.Time { return base.Add(d) } }
	files := []string{CACertName, ServingCertName, AdminCertName}

	tests := []struct {
		name string
		// second changes the directory or options after a first Ensure with Hosts {"10.0.0.1"}.
		second      func(t *testing.T, dir string) Options
		wantChanged []string // certificates reissued by the second Ensure
	}{
		{
			name:   "same options reuse everything",
			second: func(*testing.T, string) Options { return Options{Hosts: []string{"10.0.0.1"}} },
		},
		{
			name: "same SANs in another spelling reuse everything",
			second: func(*testing.T, string) Options {
				return Options{Hosts: []string{" 10.0.0.1", "LOCALHOST.", "127.0.0.1", "[::1]", ""}}
			},
		},
		{
			name:        "added host reissues only serving",
			second:      func(*testing.T, string) Options { return Options{Hosts: []string{"10.0.0.1", "api.example.com"}} },
			wantChanged: []string{ServingCertName},
		},
		{
			name:        "removed host reissues only serving",
			second:      func(*testing.T, string) Options { return Options{} },
			wantChanged: []string{ServingCertName},
		},
		{
			name: "31 days before expiry reuse everything",
			second: func(*testing.T, string) Options {
				return Options{Hosts: []string{"10.0.0.1"}, Now: at(LeafValidity - 31*24*time.Hour)}
			},
		},
		{
			name: "29 days before expiry reissues leaves",
			second: func(*testing.T, string) Options {
				return Options{Hosts: []string{"10.0.0.1"}, Now: at(LeafValidity - 29*24*time.Hour)}
			},
			wantChanged: []string{ServingCertName, AdminCertName},
		},
		{
			name: "key replaced after a crash reissues the pair",
			second: func(t *testing.T, dir string) Options {
				_, keyPEM, err := newKey()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, AdminKeyName), keyPEM, 0o600); err != nil {
					t.Fatal(err)
				}
				return Options{Hosts: []string{"10.0.0.1"}}
			},
			wantChanged: []string{AdminCertName},
		},
		{
			name: "leaf missing is recreated",
			second: func(t *testing.T, dir string) Options {
				if err := os.Remove(filepath.Join(dir, ServingCertName)); err != nil {
					t.Fatal(err)
				}
				return Options{Hosts: []string{"10.0.0.1"}}
			},
			wantChanged: []string{ServingCertName},
		},
		{
			name: "leaf signed by a foreign CA is reissued",
			second: func(t *testing.T, dir string) Options {
				other := ensure(t, Options{Dir: t.TempDir(), Hosts: []string{"10.0.0.1"}})
				for _, n := range []string{ServingCertName, ServingKeyName} {
					data, err := os.ReadFile(filepath.Join(filepath.Dir(other.ServingCertFile), n))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, n), data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				return Options{Hosts: []string{"10.0.0.1"}}
			},
			wantChanged: []string{ServingCertName},
		},
		{
			name: "CA key alone (crash before ca.crt) makes a new CA",
			second: func(t *testing.T, dir string) Options {
				if err := os.Remove(filepath.Join(dir, CACertName)); err != nil {
					t.Fatal(err)
				}
				return Options{Hosts: []string{"10.0.0.1"}}
			},
			wantChanged: []string{CACertName, ServingCertName, AdminCertName},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first := ensure(t, Options{Dir: dir, Hosts: []string{"10.0.0.1"}, Now: at(0)})
			before := map[string]string{}
			for _, f := range files {
				before[f] = serial(t, filepath.Join(dir, f))
			}
			o := tt.second(t, dir)
			o.Dir = dir
			if o.Now == nil {
				o.Now = at(0)
			}
			second := ensure(t, o)

			var changed []string
			for _, f := range files {
				if serial(t, filepath.Join(dir, f)) != before[f] {
					changed = append(changed, f)
				}
			}
			if !slices.Equal(changed, tt.wantChanged) {
				t.Errorf("reissued %v, want %v", changed, tt.wantChanged)
			}
			if !publicKeysEqual(first.ServiceAccountKey.Public(), second.ServiceAccountKey.Public()) {
				t.Error("service-account key changed")
			}
			if second.CA.SerialNumber.String() != serial(t, second.CAFile) {
				t.Error("PKI.CA is not the CA on disk")
			}
			if !bytes.Equal(second.AdminCertPEM, must(os.ReadFile(second.AdminCertFile))) {
				t.Error("PKI.AdminCertPEM is not the admin certificate on disk")
			}
			verifyLeaves(t, second)
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// verifyLeaves checks that the serving and admin certificates on disk verify against p.CA and
// match their keys.
func verifyLeaves(t *testing.T, p *PKI) {
	t.Helper()
	for _, l := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{
		{p.ServingCertFile, p.ServingKeyFile, x509.ExtKeyUsageServerAuth},
		{p.AdminCertFile, p.AdminKeyFile, x509.ExtKeyUsageClientAuth},
	} {
		cert := mustCert(t, l.cert)
		key, _, err := readKey(l.key)
		if err != nil {
			t.Fatal(err)
		}
		if r := renewalReason(cert, key, p.CA, l.usage, p.clock(), nil); r != "" {
			t.Errorf("%s: %s", l.cert, r)
		}
	}
}

func TestEnsureRefuses(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    string // substring of the error
		corrupt bool   // error wraps ErrCorrupt
	}{
		{
			name:    "CA key missing",
			prepare: func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, CAKeyName)) },
			want:    filepath.Join("", CAKeyName) + " is missing",
		},
		{
			name: "CA key from elsewhere",
			prepare: func(t *testing.T, dir string) {
				_, keyPEM, _ := newKey()
				_ = os.WriteFile(filepath.Join(dir, CAKeyName), keyPEM, 0o600)
			},
			want: CAKeyName + " does not match", corrupt: true,
		},
		{
			name: "CA is a leaf",
			prepare: func(t *testing.T, dir string) {
				_ = os.Rename(filepath.Join(dir, ServingCertName), filepath.Join(dir, CACertName))
				_ = os.Rename(filepath.Join(dir, ServingKeyName), filepath.Join(dir, CAKeyName))
			},
			want: "not a CA certificate", corrupt: true,
		},
		{
			name: "private key where a certificate belongs",
			prepare: func(t *testing.T, dir string) {
				_ = os.Rename(filepath.Join(dir, AdminKeyName), filepath.Join(dir, AdminCertName))
			},
			want: AdminCertName + `: PEM block "PRIVATE KEY"`, corrupt: true,
		},
		{
			name: "garbage after the PEM block",
			prepare: func(t *testing.T, dir string) {
				f, _ := os.OpenFile(filepath.Join(dir, ServiceAccountPubName), os.O_APPEND|os.O_WRONLY, 0)
				_, _ = f.WriteString("-----BEGIN PUB")
				_ = f.Close()
			},
			want: ServiceAccountPubName + ": unexpected data", corrupt: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ensure(t, Options{Dir: dir})
			tt.prepare(t, dir)
			_, err := Ensure(Options{Dir: dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Ensure error = %v, want it to contain %q", err, tt.want)
			}
			if errors.Is(err, ErrCorrupt) != tt.corrupt {
				t.Errorf("errors.Is(err, ErrCorrupt) = %v, want %v", !tt.corrupt, tt.corrupt)
			}
		})
	}

	t.Run("expired CA", func(t *testing.T) {
		dir := t.TempDir()
		ensure(t, Options{Dir: dir})
		_, err := Ensure(Options{Dir: dir, Now: func() time.Time { return time.Now().Add(CAValidity + time.Hour) }})
		if err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), CACertName) {
			t.Fatalf("Ensure error = %v, want CA expired", err)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		for _, o := range []Options{{}, {Dir: t.TempDir(), Hosts: []string{"10.0.0.1:6443"}}, {Dir: t.TempDir(), Hosts: []string{"bad host"}}} {
			if _, err := Ensure(o); err == nil {
				t.Errorf("Ensure(%+v) succeeded", o)
			}
		}
	})
}

// TestEnsureTruncatedFile truncates each file in turn: Ensure must fail naming it, and must
// not overwrite it.
func TestEnsureTruncatedFile(t *testing.T) {
	for _, name := range []string{
		CACertName, CAKeyName, ServingCertName, ServingKeyName,
		AdminCertName, AdminKeyName, ServiceAccountKeyName, ServiceAccountPubName,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ensure(t, Options{Dir: dir})
			path := filepath.Join(dir, name)
			data := must(os.ReadFile(path))
			truncated := data[:len(data)/2]
			if err := os.WriteFile(path, truncated, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Ensure(Options{Dir: dir})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Ensure error = %v, want ErrCorrupt naming %s", err, path)
			}
			if !bytes.Equal(must(os.ReadFile(path)), truncated) {
				t.Error("corrupt file was overwritten")
			}
		})
	}
}

func TestServingCertVerifiesForEachSAN(t *testing.T) {
	hosts := []string{"192.0.2.10", "2001:db8::1", "api.example.com", "*.apps.example.com"}
	p := ensure(t, Options{Dir: t.TempDir(), Hosts: hosts})
	cert := mustCert(t, p.ServingCertFile)

	names := []string{"localhost", "127.0.0.1", "::1", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		"192.0.2.10", "2001:db8::1", "api.example.com", "foo.apps.example.com"}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, strings.ToLower(h))
	}
	for _, name := range names {
		if _, err := cert.Verify(x509.VerifyOptions{
			DNSName: name, Roots: p.ClientCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			t.Errorf("serving cert does not verify for %q: %v", name, err)
		}
	}
	for _, name := range []string{"192.0.2.11", "example.com", "evil.com"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: p.ClientCAPool()}); err == nil {
			t.Errorf("serving cert verifies for %q", name)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: p.ClientCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("serving cert verifies as a client certificate")
	}
}

func TestServingSANs(t *testing.T) {
	base := append([]string{"localhost"}, inClusterNames...)
	tests := []struct {
		hosts    []string
		hostname string
		wantDNS  []string // beyond base
		wantIPs  []string // beyond 127.0.0.1 and ::1
		wantErr  bool
	}{
		{},
		{hostname: "Node-1.Example.com.", wantDNS: []string{"node-1.example.com"}},
		{hostname: "bad_host"}, // skipped, not an error
		{hosts: []string{"10.0.0.1", "10.0.0.1", "::ffff:10.0.0.1"}, wantIPs: []string{"10.0.0.1"}},
		{hosts: []string{"[fd00::1]", "API.example.com"}, wantDNS: []string{"api.example.com"}, wantIPs: []string{"fd00::1"}},
		{hosts: []string{"*.example.com"}, wantDNS: []string{"*.example.com"}},
		{hosts: []string{"localhost", "127.0.0.1"}},
		{hosts: []string{"example.com:6443"}, wantErr: true},
		{hosts: []string{"https://example.com"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := servingSANs(tt.hosts, tt.hostname)
		if (err != nil) != tt.wantErr {
			t.Errorf("servingSANs(%q, %q) error = %v, wantErr %v", tt.hosts, tt.hostname, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		want := sanSet{dns: append(slices.Clone(base), tt.wantDNS...), ips: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}}
		for _, ip := range tt.wantIPs {
			want.ips = append(want.ips, net.ParseIP(ip))
		}
		if want = want.normalize(); !got.equal(want) {
			t.Errorf("servingSANs(%q, %q) = %v, want %v", tt.hosts, tt.hostname, got, want)
		}
	}
}

func TestAdminCert(t *testing.T) {
	p := ensure(t, Options{Dir: t.TempDir()})
	cert := mustCert(t, p.AdminCertFile)
	if cert.Subject.CommonName != "kube-admin" || !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject = %v, want CN=kube-admin O=system:masters", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: p.ClientCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin cert does not verify as client auth: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: p.ClientCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("admin cert verifies as a server certificate")
	}
	if !p.CA.IsCA || p.CA.NotAfter.Sub(p.CA.NotBefore) < CAValidity || p.CA.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA=%v validity=%v alg=%v", p.CA.IsCA, p.CA.NotAfter.Sub(p.CA.NotBefore), p.CA.PublicKeyAlgorithm)
	}
	pub, err := readPublicKey(p.ServiceAccountPubFile)
	if err != nil || !publicKeysEqual(pub, p.ServiceAccountKey.Public()) {
		t.Errorf("sa.pub does not hold the service-account public key (err %v)", err)
	}
	if k, ok := p.ServiceAccountKey.Public().(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("service-account key is %T, want ECDSA P-256", p.ServiceAccountKey.Public())
	}
}

func TestIssueClientCert(t *testing.T) {
	p := ensure(t, Options{Dir: t.TempDir()})
	tests := []struct {
		user         string
		groups       []string
		validity     time.Duration
		wantValidity time.Duration
		wantErr      bool
	}{
		{user: "alice", groups: []string{"dev", "ops"}, validity: time.Hour, wantValidity: time.Hour},
		{user: "system:kube-controller-manager", validity: 0, wantValidity: LeafValidity},
		{user: "bob", groups: []string{"system:masters"}, validity: 2 * CAValidity, wantValidity: -1}, // clamped to the CA
		{user: "", wantErr: true},
		{user: "carol", groups: []string{""}, wantErr: true},
		{user: "dave", validity: -time.Second, wantErr: true},
	}
	for _, tt := range tests {
		certPEM, keyPEM, err := p.IssueClientCert(tt.user, tt.groups, tt.validity)
		if (err != nil) != tt.wantErr {
			t.Errorf("IssueClientCert(%q, %q, %v) error = %v, wantErr %v", tt.user, tt.groups, tt.validity, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		block, _ := pem.Decode(certPEM)
		cert := must(x509.ParseCertificate(block.Bytes))
		if cert.Subject.CommonName != tt.user || !slices.Equal(cert.Subject.Organization, tt.groups) {
			t.Errorf("subject = %v, want CN=%s O=%v", cert.Subject, tt.user, tt.groups)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: p.ClientCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: does not verify: %v", tt.user, err)
		}
		wantEnd := cert.NotBefore.Add(backdate + tt.wantValidity)
		if tt.wantValidity < 0 {
			wantEnd = p.CA.NotAfter
		}
		if d := cert.NotAfter.Sub(wantEnd); d < -time.Minute || d > time.Minute {
			t.Errorf("%s: NotAfter = %v, want %v", tt.user, cert.NotAfter, wantEnd)
		}
		keyBlock, _ := pem.Decode(keyPEM)
		key, err := parsePrivateKey(keyBlock)
		if err != nil || !publicKeysEqual(cert.PublicKey, key.Public()) {
			t.Errorf("%s: key does not match certificate (err %v)", tt.user, err)
		}
	}
	if _, _, err := (&PKI{}).IssueClientCert("x", nil, 0); err == nil {
		t.Error("IssueClientCert without a CA succeeded")
	}
}

func TestReadKeyFormats(t *testing.T) {
	ec := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: must(x509.MarshalECPrivateKey(ec))})
	path := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(path, sec1, 0o600); err != nil {
		t.Fatal(err)
	}
	key, _, err := readKey(path)
	if err != nil || !publicKeysEqual(key.Public(), ec.Public()) {
		t.Errorf("SEC1 key: %v", err)
	}
}

// BenchmarkEnsureColdStart measures the first start: CA, serving, admin and service-account
// keys generated and written (with fsync).
func BenchmarkEnsureColdStart(b *testing.B) {
	root := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if _, err := Ensure(Options{Dir: filepath.Join(root, strconv.Itoa(i))}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnsureWarmStart measures a later start: everything loaded and checked.
func BenchmarkEnsureWarmStart(b *testing.B) {
	dir := b.TempDir()
	ensure(b, Options{Dir: dir})
	for b.Loop() {
		if _, err := Ensure(Options{Dir: dir}); err != nil {
			b.Fatal(err)
		}
	}
}
