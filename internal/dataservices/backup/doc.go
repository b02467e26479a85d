// Package backup makes and restores the archives of the data kinds with the real tools, each
// streamed to an io.Writer or from an io.Reader, and decides which archives a retention keeps.
//
//   - PostgreSQL: [DumpPostgres] runs pg_dump -Fc (custom format), [RestorePostgres] pg_restore
//     into an existing database as its owner role. The admin password goes to the tools in
//     PGPASSWORD, never on a command line; a failure carries the tool's stderr.
//   - Redis: [DumpRedis] SCANs a key prefix and writes each key's DUMP and PTTL; [RestoreRedis]
//     RESTOREs them (REPLACE, with their remaining TTL), optionally under another prefix.
//   - NATS JetStream: [DumpStream] takes the server's own snapshot of the stream
//     ($JS.API.STREAM.SNAPSHOT: its store, consumers and metadata) and adds a message-level
//     export of the same messages; [RestoreStream] hands the snapshot back to the server
//     ($JS.API.STREAM.RESTORE) when the stream is restored under its own name and does not
//     exist, and otherwise republishes the export, in order, to the target stream (the
//     server restores a snapshot only under the name it was taken of).
//
// The Redis archive and the stream export are gzip'd JSON lines: a header line ([Header])
// then one line per key or message. [Prune] is the pure retention decision (keepLast, keepDaily, keepWeekly,
// ttl; the newest good archive is never dropped).
package backup
