// Package discovery serves the Kubernetes discovery endpoints from the type registry:
// /api, /api/<v>, /apis, /apis/<group> and /apis/<group>/<version>, in the legacy shapes
// (APIVersions, APIGroupList, APIGroup, APIResourceList) and, at /api and /apis, in the
// aggregated shape (apidiscovery.k8s.io v2 and v2beta1 APIGroupDiscoveryList) when the
// client's Accept header asks for it.
//
// Every response body is encoded once per registry generation and then served from memory
// with an ETag; a request with a matching If-None-Match is answered 304. A change in the
// registry (a CRD added or removed) is visible on the next request.
//
// Use:
//
//	h := discovery.New(reg)
//	mux.Handle("/api", h)
//	mux.Handle("/api/", h) // or route only the discovery paths to h
//	mux.Handle("/apis", h)
package discovery
