package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"reflect"
	"testing"
	"time"
)

// testCA is a self-signed CA certificate in PEM valid until notAfter.
func testCA(t *testing.T, cn string, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: notAfter.Add(-24 * time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestMergeAuthenticationTrust(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	later := now.Add(365 * 24 * time.Hour)
	caA, caB := testCA(t, "a", later), testCA(t, "b", later)
	proxyA, proxyB := testCA(t, "proxy-a", later), testCA(t, "proxy-b", later)
	expired := testCA(t, "old", now.Add(-time.Hour))
	justExpired := testCA(t, "just", now.Add(-time.Minute)) // within the five minutes' slack
	serverA := map[string]string{
		AuthClientCA: caA, AuthRequestHeaderClientCA: proxyA,
		AuthRequestHeaderAllowedNames:    `["front-proxy-client"]`,
		AuthRequestHeaderUsernameHeaders: `["X-Remote-User"]`, AuthRequestHeaderUIDHeaders: `["X-Remote-Uid"]`,
		AuthRequestHeaderGroupHeaders: `["X-Remote-Group"]`, AuthRequestHeaderExtraHeadersPrefix: `["X-Remote-Extra-"]`,
	}
	serverB := map[string]string{
		AuthClientCA: caB, AuthRequestHeaderClientCA: proxyB,
		AuthRequestHeaderAllowedNames:    `["aggregator"]`,
		AuthRequestHeaderUsernameHeaders: `["X-Remote-User"]`,
		AuthRequestHeaderGroupHeaders:    `["X-Remote-Group"]`, AuthRequestHeaderExtraHeadersPrefix: `["X-Remote-Extra-"]`,
	}
	for _, c := range []struct {
		name          string
		existing, own map[string]string
		want          map[string]string
		skipped       []string
	}{
		{name: "first server", existing: nil, own: serverA, want: serverA},
		{name: "same again", existing: serverA, own: serverA, want: serverA},
		{name: "second server adds its own, keeps the first's", existing: serverA, own: serverB, want: map[string]string{
			AuthClientCA: caA + caB, AuthRequestHeaderClientCA: proxyA + proxyB,
			AuthRequestHeaderAllowedNames:    `["front-proxy-client","aggregator"]`,
			AuthRequestHeaderUsernameHeaders: `["X-Remote-User"]`, AuthRequestHeaderUIDHeaders: `["X-Remote-Uid"]`,
			AuthRequestHeaderGroupHeaders: `["X-Remote-Group"]`, AuthRequestHeaderExtraHeadersPrefix: `["X-Remote-Extra-"]`,
		}},
		{name: "expired certificates go, duplicates once, other keys dropped",
			existing: map[string]string{AuthClientCA: expired + caA + justExpired + caA, "unrelated": "x"},
			own:      map[string]string{AuthClientCA: caA},
			want:     map[string]string{AuthClientCA: caA + justExpired}},
		{name: "no request-header CA, no request-header keys",
			existing: map[string]string{AuthRequestHeaderAllowedNames: `["x"]`, AuthRequestHeaderClientCA: expired},
			own:      map[string]string{AuthClientCA: caB},
			want:     map[string]string{AuthClientCA: caB}},
		{name: "unparseable values are replaced",
			existing: map[string]string{AuthClientCA: "not PEM", AuthRequestHeaderClientCA: proxyA, AuthRequestHeaderGroupHeaders: "{", AuthRequestHeaderAllowedNames: `["x"]`},
			own:      map[string]string{AuthClientCA: caB, AuthRequestHeaderClientCA: proxyB, AuthRequestHeaderGroupHeaders: `["G"]`},
			want: map[string]string{AuthClientCA: caB, AuthRequestHeaderClientCA: proxyA + proxyB,
				AuthRequestHeaderAllowedNames: `["x"]`, AuthRequestHeaderUsernameHeaders: `[]`,
				AuthRequestHeaderGroupHeaders: `["G"]`, AuthRequestHeaderExtraHeadersPrefix: `[]`},
			skipped: []string{AuthClientCA, AuthRequestHeaderGroupHeaders}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, skipped := MergeAuthenticationTrust(c.existing, c.own, now)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("merged\n got %v\nwant %v", keysAndSubjects(t, got), keysAndSubjects(t, c.want))
			}
			if !reflect.DeepEqual(skipped, c.skipped) {
				t.Errorf("skipped %v, want %v", skipped, c.skipped)
			}
		})
	}
}

// keysAndSubjects shows a ConfigMap's data with each bundle as its certificates' CNs.
func keysAndSubjects(t *testing.T, data map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range data {
		if k == AuthClientCA || k == AuthRequestHeaderClientCA {
			certs, err := parseBundle(v)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			var cns []string
			for _, c := range certs {
				cns = append(cns, c.Subject.CommonName)
			}
			out[k] = cns
			continue
		}
		out[k] = v
	}
	return out
}
