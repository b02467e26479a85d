// Package backup makes and restores the archives of the data kinds with the real tools, each
// streamed to an io.Writer or from an io.Reader, and decides which archives a retention keeps.
//
//   - PostgreSQL: [DumpPostgres] runs pg_dump -Fc (custom format), [RestorePostgres] pg_restore
//     into an existing database as its owner role. The admin password goes to the tools in
//     PGPASSWORD, never on a command line; a failure carries the tool's stderr.
//   - Redis: [DumpRedis] SCANs a key prefix and writes each key's DUMP and PTTL; [RestoreRedis]
//     RESTOREs them (REPLACE, with their remaining TTL), optionally under another prefix.
//   - NATS JetStream: nats.go has no stream snapshot API, so [DumpStream] is a message-level
//     export (every message with subject, headers and data, read by an ordered consumer) and
//     [RestoreStream] republishes them to the stream, in order.
//
// The Redis and stream archives are gzip'd JSON lines: a header line ([Header]) then one line
// per key or message. [Prune] is the pure retention decision (keepLast, keepDaily, keepWeekly,
// ttl; the newest good archive is never dropped).
package backup
