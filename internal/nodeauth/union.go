package nodeauth

import (
	"context"
	"fmt"
	"strings"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
)

// Named is one authorizer of a Union with the name its reasons carry.
type Named struct {
	Name       string
	Authorizer filters.Authorizer
}

// Union asks its authorizers in order, as kube-apiserver's authorization chain
// (--authorization-mode=Node,RBAC): the first that allows decides; when none does, the
// request is denied with every authorizer's reason, each prefixed with its name and joined
// by newlines, as upstream's union authorizer reports them. Each authorizer answering false
// is taken as "no opinion".
type Union []Named

var _ filters.Authorizer = Union(nil)

// Authorize implements filters.Authorizer.
func (un Union) Authorize(ctx context.Context, u *request.User, info *request.Info) (bool, string) {
	var reasons []string
	for _, n := range un {
		ok, reason := n.Authorizer.Authorize(ctx, u, info)
		if ok {
			return true, reason
		}
		if reason != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s", n.Name, reason))
		}
	}
	return false, strings.Join(reasons, "\n")
}
