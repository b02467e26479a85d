package encryption

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

const k32 = "c2VjcmV0IGlzIHNlY3VyZSwgSSB0aGluayBzbyBzb28=" // 32 bytes
const k32b = "YW5vdGhlciBzZWNyZXQsIGV2ZW4gbW9yZSBzZWN1cmU="

func cfg(providers string) string {
	return "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, '*.apps']\n  providers:\n" + providers
}

func TestRoundTrip(t *testing.T) {
	for _, p := range []string{"aescbc", "aesgcm", "secretbox"} {
		t.Run(p, func(t *testing.T) {
			tr, err := Load([]byte(cfg("  - " + p + ":\n      keys:\n      - {name: k1, secret: " + k32 + "}\n  - identity: {}\n")))
			if err != nil {
				t.Fatal(err)
			}
			key := "/registry/core/secrets/ns/a"
			plain := []byte(`{"data":{"x":"dG9wc2VjcmV0"}}`)
			sealed, err := tr.TransformToStorage(context.Background(), key, plain)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(sealed, []byte("k8s:enc:"+p+":v1:k1:")) || bytes.Contains(sealed, []byte("dG9wc2VjcmV0")) {
				t.Fatalf("sealed value %q", sealed)
			}
			got, stale, err := tr.TransformFromStorage(key, sealed)
			if err != nil || stale || !bytes.Equal(got, plain) {
				t.Fatalf("open: %q stale=%v err=%v", got, stale, err)
			}
			// Plain values written before encryption read through identity, as stale.
			got, stale, err = tr.TransformFromStorage(key, plain)
			if err != nil || !stale || !bytes.Equal(got, plain) {
				t.Fatalf("identity read: %q stale=%v err=%v", got, stale, err)
			}
			// A tampered value does not open.
			sealed[len(sealed)-1] ^= 1
			if _, _, err := tr.TransformFromStorage(key, sealed); err == nil && p != "aescbc" {
				t.Fatal("tampered value opened")
			}
			// Resources not listed pass unchanged.
			out, _ := tr.TransformToStorage(context.Background(), "/registry/core/configmaps/ns/a", plain)
			if !bytes.Equal(out, plain) {
				t.Fatal("configmaps were transformed")
			}
			out, _ = tr.TransformToStorage(context.Background(), "/registry/apps/deployments/ns/a", plain)
			if bytes.Equal(out, plain) {
				t.Fatal("*.apps not transformed")
			}
		})
	}
}

func TestRotation(t *testing.T) {
	old, err := Load([]byte(cfg("  - aescbc:\n      keys:\n      - {name: k1, secret: " + k32 + "}\n")))
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := Load([]byte(cfg("  - aescbc:\n      keys:\n      - {name: k2, secret: " + k32b + "}\n      - {name: k1, secret: " + k32 + "}\n")))
	if err != nil {
		t.Fatal(err)
	}
	key := "/registry/core/secrets/ns/a"
	sealed, _ := old.TransformToStorage(context.Background(), key, []byte("{}"))
	got, stale, err := rotated.TransformFromStorage(key, sealed)
	if err != nil || !stale || string(got) != "{}" {
		t.Fatalf("old key read: %q stale=%v err=%v", got, stale, err)
	}
	if _, _, err := old.TransformFromStorage(key, []byte("{}")); err == nil {
		t.Fatal("plain value read without identity")
	}
}

func TestBadConfig(t *testing.T) {
	for name, c := range map[string]string{
		"kind":       "apiVersion: v1\nkind: Pod\n",
		"unknown":    cfg("  - aescbc:\n      keys:\n      - {name: k1, secret: " + k32 + ", extra: 1}\n"),
		"short key":  cfg("  - aescbc:\n      keys:\n      - {name: k1, secret: c2hvcnQ=}\n"),
		"not base64": cfg("  - secretbox:\n      keys:\n      - {name: k1, secret: '!!'}\n"),
		"two":        cfg("  - identity: {}\n    aescbc:\n      keys:\n      - {name: k1, secret: " + k32 + "}\n"),
		"none":       cfg("  - {}\n"),
		"kms":        cfg("  - kms: {name: x, endpoint: unix:///x}\n"),
		"no keys":    cfg("  - aesgcm: {keys: []}\n"),
		"colon":      cfg("  - aesgcm:\n      keys:\n      - {name: 'a:b', secret: " + k32 + "}\n"),
	} {
		if _, err := Load([]byte(c)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), k32) {
			t.Errorf("%s: error leaks the secret", name)
		}
	}
}
