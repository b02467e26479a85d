// Package redisacl confines a Redis ACL user to one key prefix (go-redis v9): keys ~prefix*,
// channels &prefix*, every command except those that ignore key patterns (KEYS, SCAN,
// RANDOMKEY, FLUSHALL, FLUSHDB, SWAPDB, SELECT) and the @admin and @dangerous categories.
// Retain disables the user and ends its connections; Delete removes the user and UNLINKs
// the prefix's keys.
//
// Contract: Ensure is idempotent (ACL SETUSER with reset rewrites the whole user at once);
// Observe compares the user with what Ensure would write, password included (Redis reports
// the SHA-256 of each password). Errors never contain passwords.
package redisacl
