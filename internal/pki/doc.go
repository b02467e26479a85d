// Package pki keeps Kube's public-key infrastructure in the data directory.
//
// Ensure is called once at server start with Options.Dir = <data-dir>/pki. On the first start
// it creates, and on later starts it loads and reuses:
//
//	ca.crt, ca.key                  the cluster CA: ECDSA P-256, self-signed, valid 10 years
//	serving.crt, serving.key        the API server's serving certificate, signed by the CA
//	admin.crt, admin.key            a client certificate CN=kube-admin, O=system:masters
//	sa.key, sa.pub                  the service-account token signing key (ECDSA P-256, ES256)
//
// Leaf certificates are valid for one year (never beyond the CA). Private keys are PKCS#8 PEM
// ("PRIVATE KEY"); SEC1 and PKCS#1 keys placed there by an administrator are accepted too.
//
// The contract on disk:
//
//   - The directory is 0700, files holding private keys are 0600, certificates and the public
//     key are 0644. Looser modes found on an existing directory or key file are tightened.
//   - Every write goes to a temporary file in the same directory, is fsynced and renamed into
//     place, so a crash never leaves a half-written file. Keys are written before the
//     certificates that carry them; a crash between the two leaves a key that does not match its
//     certificate, which the next start detects and repairs by issuing a new pair. Temporary
//     files left by a crash are removed.
//   - A file that exists but cannot be parsed is never overwritten: Ensure fails with an error
//     wrapping ErrCorrupt that names the file, so damage is seen by a human.
//   - The CA is the root of trust and is never replaced silently: a ca.crt without its ca.key,
//     a key that does not match, or an expired CA is an error. Only when ca.crt is absent
//     (first start, or a crash before it was written) is a new CA created; deleting ca.crt and
//     ca.key is how an administrator rotates the CA.
//   - The serving certificate is reissued when its SAN set differs from the wanted one (the
//     Hosts option plus localhost, 127.0.0.1, ::1, os.Hostname() and the in-cluster names
//     kubernetes, kubernetes.default, kubernetes.default.svc,
//     kubernetes.default.svc.cluster.local), when it expires within 30 days, or when it no
//     longer verifies against the CA or matches its key. The admin certificate is reissued on
//     the same expiry and validity rules. The CA and the service-account key are untouched by
//     these renewals, so tokens and kubeconfigs issued earlier keep working.
//   - A missing or mismatched sa.pub is rewritten from sa.key.
//
// Ensure is not safe to run from two processes on one directory at once; the server holds the
// data directory for itself.
//
// After Ensure, ServingTLSConfig gives the API server's TLS configuration (client certificates
// are verified against the CA when offered, TLS 1.2 or later, h2 and http/1.1), ClientCAPool the
// pool for authenticating x509 clients, IssueClientCert mints client certificates for users
// and loopback identities, and WriteKubeconfig writes a self-contained kubeconfig for them.
package pki
