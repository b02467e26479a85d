// Package serviceaccount issues and validates ServiceAccount tokens: ES256 JWTs signed with
// the server's service-account key (internal/pki), in upstream's claim format, bound to the
// ServiceAccount's UID, with audiences and an expiry.
//
// Tokens are issued through the TokenRequest subresource (POST
// .../serviceaccounts/<name>/token, `kubectl create token`), served by Tokens.CreateToken as
// a registry.Subresource. Tokens.AuthenticateToken validates them for the filter chain:
// signature, issuer, expiry, audience, and that the ServiceAccount still exists with the same
// UID (a token of a deleted or re-created ServiceAccount is refused). ServiceAccounts are
// looked up in an informer cache kept by Start, with a live read when the cache disagrees.
package serviceaccount
