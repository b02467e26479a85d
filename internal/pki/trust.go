package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"slices"
	"time"
)

// The keys of kube-system/extension-apiserver-authentication, the ConfigMap in which every
// API server publishes whom its callers' certificates and its front proxy's request
// headers are to be trusted from (extension API servers, kube-scheduler and
// kube-controller-manager read it).
const (
	AuthClientCA                        = "client-ca-file"
	AuthRequestHeaderClientCA           = "requestheader-client-ca-file"
	AuthRequestHeaderAllowedNames       = "requestheader-allowed-names"
	AuthRequestHeaderUsernameHeaders    = "requestheader-username-headers"
	AuthRequestHeaderUIDHeaders         = "requestheader-uid-headers"
	AuthRequestHeaderGroupHeaders       = "requestheader-group-headers"
	AuthRequestHeaderExtraHeadersPrefix = "requestheader-extra-headers-prefix"
)

// expirySlack is how long past its NotAfter a certificate is still kept in a merged
// bundle (kube-apiserver's five minutes).
const expirySlack = 5 * time.Minute

// requestHeaderLists are the JSON string lists of the request-header keys, in the order
// they are merged.
var requestHeaderLists = []string{AuthRequestHeaderAllowedNames, AuthRequestHeaderUsernameHeaders,
	AuthRequestHeaderUIDHeaders, AuthRequestHeaderGroupHeaders, AuthRequestHeaderExtraHeadersPrefix}

// MergeAuthenticationTrust returns the extension-apiserver-authentication data with own
// (this server's) added to existing (what the ConfigMap holds, written by any server), the
// rules of kube-apiserver's ClusterAuthenticationTrust controller, so that API servers
// sharing a cluster with different CAs never drop each other's:
//
//   - client-ca-file and requestheader-client-ca-file: the certificates of both, existing's
//     first, each once (byte for byte), without those expired more than five minutes
//     before now; a key whose bundle ends up empty is left out;
//   - the request-header name and header lists: the union, existing's entries first, each
//     once; they are written only when the merged request-header CA is not empty, and
//     requestheader-uid-headers only when its list is not empty;
//   - any other key is dropped.
//
// A value of existing that cannot be parsed (not PEM certificates, not a JSON list of
// strings) is left out of the merge, so that a corrupted ConfigMap heals; skipped names
// those keys. own's values are expected to parse.
func MergeAuthenticationTrust(existing, own map[string]string, now time.Time) (merged map[string]string, skipped []string) {
	merged = map[string]string{}
	bundle := func(key string) []byte {
		var certs []*x509.Certificate
		for _, src := range []map[string]string{existing, own} {
			c, err := parseBundle(src[key])
			if err != nil {
				skipped = append(skipped, key)
				continue
			}
			certs = append(certs, c...)
		}
		return encodeBundle(now, certs)
	}
	if b := bundle(AuthClientCA); len(b) > 0 {
		merged[AuthClientCA] = string(b)
	}
	rh := bundle(AuthRequestHeaderClientCA)
	if len(rh) == 0 {
		return merged, skipped
	}
	merged[AuthRequestHeaderClientCA] = string(rh)
	for _, key := range requestHeaderLists {
		list := []string{}
		for _, src := range []map[string]string{existing, own} {
			l, err := parseList(src[key])
			if err != nil {
				skipped = append(skipped, key)
				continue
			}
			for _, s := range l {
				if !slices.Contains(list, s) {
					list = append(list, s)
				}
			}
		}
		if key == AuthRequestHeaderUIDHeaders && len(list) == 0 {
			continue
		}
		b, _ := json.Marshal(list) // a []string always marshals
		merged[key] = string(b)
	}
	return merged, skipped
}

// parseBundle parses the certificates of a PEM bundle ("" is an empty bundle).
func parseBundle(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(rest)) > 0 || (len(certs) == 0 && len(bytes.TrimSpace([]byte(s))) > 0) {
		return nil, errors.New("not a PEM certificate bundle")
	}
	return certs, nil
}

// encodeBundle is certs in PEM, each once, without those expired more than expirySlack
// before now.
func encodeBundle(now time.Time, certs []*x509.Certificate) []byte {
	var out bytes.Buffer
	var seen [][]byte
	for _, c := range certs {
		if c.NotAfter.Before(now.Add(-expirySlack)) || slices.ContainsFunc(seen, func(r []byte) bool { return bytes.Equal(r, c.Raw) }) {
			continue
		}
		seen = append(seen, c.Raw)
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}

// parseList parses a JSON list of strings ("" is an empty list).
func parseList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, err
	}
	return l, nil
}
