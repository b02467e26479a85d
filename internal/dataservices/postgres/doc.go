// Package postgres provisions databases and their owner roles on a PostgreSQL server through
// its admin URL (pgx v5): a role with a password (sent as a SCRAM-SHA-256 verifier, so the
// password never reaches the server's logs), CREATE DATABASE … OWNER, REVOKE CONNECT FROM
// PUBLIC, extensions, schemas, a connection limit and grants to other roles; login revoked
// (Retain) or database and role dropped (Delete); the database's size.
//
// Contract: every call is idempotent and converges from any partial state (a process killed
// between two statements): a role carries the owner key in its comment and a database is
// ours when its owner is our role, so nothing is created twice and nothing of someone else
// is touched (ErrConflict). Identifiers are quoted with pgx.Identifier.Sanitize. Errors never
// contain passwords.
package postgres
