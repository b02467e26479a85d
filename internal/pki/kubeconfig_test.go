package pki

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeconfigEndToEnd writes a kubeconfig for an issued identity, loads it the way kubectl
// does, and talks to a TLS server configured by ServingTLSConfig through client-go's transport:
// the server must verify the client certificate and see its CN and groups, over HTTP/2.
func TestKubeconfigEndToEnd(t *testing.T) {
	p := ensure(t, Options{Dir: t.TempDir()})

	srvTLS, err := p.ServingTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "anonymous", http.StatusUnauthorized)
			return
		}
		c := r.TLS.VerifiedChains[0][0]
		_, _ = io.WriteString(w, r.Proto+" "+c.Subject.CommonName)
		for _, g := range c.Subject.Organization {
			_, _ = io.WriteString(w, " "+g)
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the foreign-CA case fails its handshake on purpose
	srv.TLS = srvTLS
	srv.StartTLS()
	defer srv.Close()

	certPEM, keyPEM, err := p.IssueClientCert("alice", []string{"dev"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, user      string
		certPEM, keyPEM []byte
		want            string
	}{
		{"admin", "kube-admin", p.AdminCertPEM, p.AdminKeyPEM, "HTTP/2.0 kube-admin system:masters"},
		{"issued user", "alice", certPEM, keyPEM, "HTTP/2.0 alice dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
			if err := WriteKubeconfig(path, srv.URL, p.CAPEM, tt.certPEM, tt.keyPEM, tt.user); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("kubeconfig mode: %v %v", fi.Mode(), err)
			}

			raw, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if raw.CurrentContext != "kube" || raw.Contexts["kube"].Cluster != "kube" || raw.Contexts["kube"].AuthInfo != tt.user {
				t.Errorf("contexts = %+v, current %q", raw.Contexts["kube"], raw.CurrentContext)
			}
			if c := raw.Clusters["kube"]; c == nil || c.CertificateAuthority != "" || len(c.CertificateAuthorityData) == 0 {
				t.Errorf("cluster does not embed the CA: %+v", c)
			}

			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			tlsCfg, err := rest.TLSConfigFor(cfg)
			if err != nil || tlsCfg == nil {
				t.Fatalf("rest.TLSConfigFor: %v %v", tlsCfg, err)
			}
			client, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get(srv.URL + "/whoami")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != tt.want {
				t.Errorf("server saw %d %q, want %q", resp.StatusCode, body, tt.want)
			}
		})
	}

	t.Run("no client certificate is allowed but anonymous", func(t *testing.T) {
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CAPEM}}
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status = %d, want 401", resp.StatusCode)
		}
	})

	t.Run("certificate from a foreign CA is rejected in the handshake", func(t *testing.T) {
		other := ensure(t, Options{Dir: t.TempDir()})
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
			CAData: p.CAPEM, CertData: other.AdminCertPEM, KeyData: other.AdminKeyPEM,
		}}
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := client.Get(srv.URL); err == nil {
			_ = resp.Body.Close()
			t.Errorf("request with a foreign client certificate succeeded: %d", resp.StatusCode)
		}
	})
}

func TestWriteKubeconfigReplacesLooseFile(t *testing.T) {
	p := ensure(t, Options{Dir: t.TempDir()})
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKubeconfig(path, "https://127.0.0.1:6443", p.CAPEM, p.AdminCertPEM, p.AdminKeyPEM, ""); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Contexts["kube"].AuthInfo != "kube" || cfg.AuthInfos["kube"] == nil {
		t.Errorf("default user entry missing: %+v", cfg.Contexts["kube"])
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	for _, args := range [][]string{{"", "s"}, {path, ""}} {
		if err := WriteKubeconfig(args[0], args[1], p.CAPEM, p.AdminCertPEM, p.AdminKeyPEM, "u"); err == nil {
			t.Errorf("WriteKubeconfig(%q, %q) succeeded", args[0], args[1])
		}
	}
}
