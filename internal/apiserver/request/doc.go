// Package request parses an HTTP request to the Kubernetes API into what it asks for: the
// verb, group, version, resource, subresource, namespace and name. Filters (authorization,
// audit, limits) and the REST handler all read the same Info from the request context.
package request
