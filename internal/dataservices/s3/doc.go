// Package s3 runs Kube's embedded S3-compatible store and provisions buckets and access keys
// on any S3 server that a server entry names.
//
// [Embedded] is versitygw (github.com/versity/versitygw, Apache-2.0) linked into the binary:
// its posix backend under the data directory, its file-based IAM for per-bucket access keys,
// a loopback listener. It runs in a child process of the same binary, not in-process, for two
// reasons found while embedding it: the posix backend calls os.Chdir into its root (and then
// resolves buckets as relative paths) — a process-wide change an API server cannot take — and
// embedgw allows one gateway per process. The child is the binary re-executed with
// KUBE_EMBEDDED_S3_CHILD=1: [init] diverts it to the gateway before main runs (so a test binary
// that links this package can run it too), its configuration arrives on stdin, and it exits
// when stdin closes (the parent ended, even by kill -9) or on SIGTERM.
//
// [Client] is the S3 side over aws-sdk-go-v2 (buckets, objects, usage, versioning); [Admin] is
// versitygw's admin API (create-user, delete-user, change-bucket-owner), SigV4-signed with the
// root key. A bucket's access key is a versitygw account of role "user" that owns the bucket:
// such an account cannot create buckets and has no grant on buckets it does not own.
package s3
