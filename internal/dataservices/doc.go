// Package dataservices groups what the data kinds (Database, Cache, Topic, Bucket, Backup,
// Alert; their drivers live in internal/platform) provision with on real servers:
//
//   - servers: the server entries a platform admin registers (kubeos.dev/server Secrets in
//     kube-system) and their resolution per tenant;
//   - postgres: roles and databases on PostgreSQL (pgx);
//   - redisacl: ACL users confined to a key prefix on Redis (go-redis);
//   - nats, s3, backup: JetStream streams, buckets and access keys, dumps and restores.
//
// Each package speaks to one server and knows nothing of Kubernetes objects, except servers.
package dataservices
