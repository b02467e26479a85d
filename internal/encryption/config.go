package encryption

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"kubeos.dev/kube/internal/storage"
)

// LoadFile reads an EncryptionConfiguration file and builds its transformer.
func LoadFile(path string) (*Transformer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(data)
}

// Load builds the transformer of an EncryptionConfiguration (YAML or JSON). Unknown fields,
// unknown providers and bad keys are refused.
func Load(data []byte) (*Transformer, error) {
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if cfg.Kind != "EncryptionConfiguration" || cfg.APIVersion != "apiserver.config.k8s.io/v1" {
		return nil, fmt.Errorf("want kind EncryptionConfiguration, apiVersion apiserver.config.k8s.io/v1; got kind %q, apiVersion %q", cfg.Kind, cfg.APIVersion)
	}
	t := &Transformer{}
	seen := map[string]bool{}
	for i, rc := range cfg.Resources {
		if len(rc.Resources) == 0 {
			return nil, fmt.Errorf("resources[%d].resources: must name at least one resource", i)
		}
		if len(rc.Providers) == 0 {
			return nil, fmt.Errorf("resources[%d].providers: must have at least one provider", i)
		}
		chain := &providerChain{}
		for j, pc := range rc.Providers {
			ps, err := newProviders(pc)
			if err != nil {
				return nil, fmt.Errorf("resources[%d].providers[%d]: %w", i, j, err)
			}
			chain.providers = append(chain.providers, ps...)
		}
		for _, r := range rc.Resources {
			if seen[r] {
				return nil, fmt.Errorf("resources[%d].resources: %q is listed twice", i, r)
			}
			seen[r] = true
			res, group, _ := strings.Cut(r, ".")
			if res == "" || (res == "*" && !strings.Contains(r, ".")) {
				return nil, fmt.Errorf("resources[%d].resources: %q is not a resource (use \"*.<group>\", \"*.\" or \"*.*\" for wildcards)", i, r)
			}
			t.rules = append(t.rules, rule{resource: res, group: group, chain: chain})
		}
	}
	return t, nil
}

// Transformer seals the values of the configured resources; others pass unchanged.
type Transformer struct {
	rules []rule
}

var _ storage.Transformer = (*Transformer)(nil)

type rule struct {
	resource, group string // "*" matches any resource; group "*" any group
	chain           *providerChain
}

// chainFor finds the provider chain of a storage key (/registry/<group>/<resource>/...).
func (t *Transformer) chainFor(key string) *providerChain {
	rest, ok := strings.CutPrefix(key, storage.Prefix)
	if !ok {
		return nil
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 {
		return nil
	}
	group, resource := parts[0], parts[1]
	if group == "core" {
		group = ""
	}
	for _, r := range t.rules {
		if (r.group == "*" || r.group == group) && (r.resource == "*" || r.resource == resource) {
			return r.chain
		}
	}
	return nil
}

// TransformToStorage implements storage.Transformer.
func (t *Transformer) TransformToStorage(ctx context.Context, key string, plain []byte) ([]byte, error) {
	c := t.chainFor(key)
	if c == nil {
		return plain, nil
	}
	return c.providers[0].seal(key, plain)
}

// TransformFromStorage implements storage.Transformer.
func (t *Transformer) TransformFromStorage(key string, stored []byte) ([]byte, bool, error) {
	c := t.chainFor(key)
	if c == nil {
		if bytes.HasPrefix(stored, encPrefix) {
			return nil, false, fmt.Errorf("value is encrypted but no provider is configured for this resource")
		}
		return stored, false, nil
	}
	return c.open(key, stored)
}

var encPrefix = []byte("k8s:enc:")

type providerChain struct {
	providers []provider
}

// open tries the providers whose prefix matches, in order, as kube-apiserver does.
func (c *providerChain) open(key string, stored []byte) ([]byte, bool, error) {
	var errs []error
	for i, p := range c.providers {
		if !bytes.HasPrefix(stored, p.prefix()) {
			continue
		}
		plain, err := p.open(key, stored[len(p.prefix()):])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return plain, i != 0, nil
	}
	if len(errs) > 0 {
		return nil, false, errors.Join(errs...)
	}
	return nil, false, errors.New("no matching prefix found (is the key that wrote it, or identity, still configured?)")
}

// provider is one key of one provider.
type provider interface {
	prefix() []byte
	seal(key string, plain []byte) ([]byte, error)
	open(key string, sealed []byte) ([]byte, error)
}

func newProviders(pc apiserverv1.ProviderConfiguration) ([]provider, error) {
	n := 0
	var out []provider
	if pc.Identity != nil {
		n++
		out = append(out, identity{})
	}
	if pc.AESCBC != nil {
		n++
		ps, err := keys("aescbc", pc.AESCBC.Keys, []int{16, 24, 32}, func(name string, secret []byte) (provider, error) {
			block, err := aes.NewCipher(secret)
			return &cbc{pfx: []byte("k8s:enc:aescbc:v1:" + name + ":"), block: block}, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if pc.AESGCM != nil {
		n++
		ps, err := keys("aesgcm", pc.AESGCM.Keys, []int{16, 24, 32}, func(name string, secret []byte) (provider, error) {
			block, err := aes.NewCipher(secret)
			if err != nil {
				return nil, err
			}
			aead, err := cipher.NewGCM(block)
			return &gcm{pfx: []byte("k8s:enc:aesgcm:v1:" + name + ":"), aead: aead}, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if pc.Secretbox != nil {
		n++
		ps, err := keys("secretbox", pc.Secretbox.Keys, []int{32}, func(name string, secret []byte) (provider, error) {
			sb := &secretbox{pfx: []byte("k8s:enc:secretbox:v1:" + name + ":")}
			copy(sb.key[:], secret)
			return sb, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if pc.KMS != nil {
		return nil, errors.New("kms: not supported by Kube (use aescbc, aesgcm, secretbox or identity)")
	}
	if n != 1 {
		return nil, fmt.Errorf("exactly one provider must be set, got %d", n)
	}
	return out, nil
}

// keys builds one provider per key, checking names and secrets.
func keys(kind string, ks []apiserverv1.Key, sizes []int, mk func(name string, secret []byte) (provider, error)) ([]provider, error) {
	if len(ks) == 0 {
		return nil, fmt.Errorf("%s.keys: at least one key is required", kind)
	}
	names := map[string]bool{}
	var out []provider
	for i, k := range ks {
		if k.Name == "" || strings.Contains(k.Name, ":") {
			return nil, fmt.Errorf("%s.keys[%d].name: must be non-empty and contain no ':'", kind, i)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("%s.keys[%d].name: %q is used twice", kind, i, k.Name)
		}
		names[k.Name] = true
		secret, err := base64.StdEncoding.DecodeString(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("%s.keys[%d].secret: not base64: %v", kind, i, err)
		}
		ok := false
		for _, s := range sizes {
			ok = ok || len(secret) == s
		}
		if !ok {
			return nil, fmt.Errorf("%s.keys[%d].secret: %d bytes, want one of %v", kind, i, len(secret), sizes)
		}
		p, err := mk(k.Name, secret)
		if err != nil {
			return nil, fmt.Errorf("%s.keys[%d]: %w", kind, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// identity stores plain values; it reads anything that is not sealed.
type identity struct{}

func (identity) prefix() []byte { return nil }
func (identity) seal(_ string, plain []byte) ([]byte, error) {
	return plain, nil
}
func (identity) open(_ string, stored []byte) ([]byte, error) {
	if bytes.HasPrefix(stored, encPrefix) {
		return nil, errors.New("identity transformer tried to read encrypted data")
	}
	return stored, nil
}

type cbc struct {
	pfx   []byte
	block cipher.Block
}

func (c *cbc) prefix() []byte { return c.pfx }

func (c *cbc) seal(_ string, plain []byte) ([]byte, error) {
	bs := aes.BlockSize
	pad := bs - len(plain)%bs
	out := make([]byte, len(c.pfx)+bs+len(plain)+pad)
	n := copy(out, c.pfx)
	iv := out[n : n+bs]
	if _, err := rand.Read(iv); err != nil {
		return nil, err
	}
	body := out[n+bs:]
	copy(body, plain)
	for i := len(plain); i < len(body); i++ {
		body[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(c.block, iv).CryptBlocks(body, body)
	return out, nil
}

func (c *cbc) open(_ string, sealed []byte) ([]byte, error) {
	bs := aes.BlockSize
	if len(sealed) < 2*bs || len(sealed)%bs != 0 {
		return nil, errors.New("aescbc: the stored data is not a whole number of blocks")
	}
	body := make([]byte, len(sealed)-bs)
	cipher.NewCBCDecrypter(c.block, sealed[:bs]).CryptBlocks(body, sealed[bs:])
	pad := int(body[len(body)-1])
	if pad == 0 || pad > bs || pad > len(body) {
		return nil, errors.New("aescbc: invalid padding")
	}
	for _, b := range body[len(body)-pad:] {
		if int(b) != pad {
			return nil, errors.New("aescbc: invalid padding")
		}
	}
	return body[:len(body)-pad], nil
}

type gcm struct {
	pfx  []byte
	aead cipher.AEAD
}

func (g *gcm) prefix() []byte { return g.pfx }

func (g *gcm) seal(key string, plain []byte) ([]byte, error) {
	ns := g.aead.NonceSize()
	out := make([]byte, len(g.pfx)+ns, len(g.pfx)+ns+len(plain)+g.aead.Overhead())
	n := copy(out, g.pfx)
	if _, err := rand.Read(out[n : n+ns]); err != nil {
		return nil, err
	}
	return g.aead.Seal(out, out[n:n+ns], plain, []byte(key)), nil
}

func (g *gcm) open(key string, sealed []byte) ([]byte, error) {
	ns := g.aead.NonceSize()
	if len(sealed) < ns {
		return nil, errors.New("aesgcm: the stored data was shorter than the required size")
	}
	return g.aead.Open(nil, sealed[:ns], sealed[ns:], []byte(key))
}
