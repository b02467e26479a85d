// Package servers resolves the server entries the data kinds provision on. A platform admin
// registers a server as a Secret in kube-system of type kubeos.dev/server, labelled
// kubeos.dev/server-kind (postgresql, redis, nats, s3, prometheus, alertmanager), with data
// url (the admin URL, credentials included; for s3 the endpoint plus accessKeyID,
// secretAccessKey and region) and optional ca.crt. Annotation kubeos.dev/tenants ("a,b")
// limits the entry to those tenants; kubeos.dev/default "true" makes it the default of its
// kind.
//
// Contract: Resolve(kind, name, tenant) returns the named entry of that kind, or the default
// one when name is empty, or a typed error — *NotFoundError (no such entry, or no default),
// *NotAllowedError (the tenant may not use it). Entries hold credentials: never log or
// report an Entry, only its Name.
package servers
