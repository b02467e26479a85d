package simnode

import (
	"context"
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// NodeUser is the identity a simulated node acts as (with group NodesGroup): what the
// Node authorizer and NodeRestriction admission recognise.
func NodeUser(node string) string { return "system:node:" + node }

// NodesGroup is every node's group.
const NodesGroup = "system:nodes"

type actAsKey struct{}

// asNode makes requests made with ctx act as node: the simulator's one client
// impersonates the node it acts for, request by request.
func asNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, actAsKey{}, node)
}

// impersonating sets Impersonate-User and Impersonate-Group from the request's context.
type impersonating struct{ rt http.RoundTripper }

func (i impersonating) RoundTrip(r *http.Request) (*http.Response, error) {
	node, ok := r.Context().Value(actAsKey{}).(string)
	if !ok {
		return i.rt.RoundTrip(r)
	}
	r = utilnet.CloneRequest(r)
	r.Header.Set("Impersonate-User", NodeUser(node))
	r.Header.Set("Impersonate-Group", NodesGroup)
	return i.rt.RoundTrip(r)
}

// nodeConfig is cfg whose requests act as the node their context names (asNode); the
// rate limit is the simulator's own.
func nodeConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return impersonating{rt} })
	return c
}
