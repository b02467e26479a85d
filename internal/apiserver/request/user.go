package request

import "context"

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

type userKey struct{}

// WithUser returns a context carrying the request's user.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the authenticated user of the request, if any.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok
}
