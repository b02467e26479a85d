// Package filters holds the HTTP layers every API request passes before a handler: panic
// recovery, request parsing, metrics, authentication, in-flight limits and the body limit.
// A request never reaches a handler unauthenticated; anonymous requests reach only the
// health and version endpoints.
package filters
