package request

import (
	"context"
	"sync"
)

type warnKey struct{}

// WithWarner returns a context whose AddWarning calls warn (the REST handler adds a Warning
// header). Calls are serialized, so warn need not be safe for concurrent use.
func WithWarner(ctx context.Context, warn func(text string)) context.Context {
	var mu sync.Mutex
	return context.WithValue(ctx, warnKey{}, func(text string) {
		mu.Lock()
		defer mu.Unlock()
		warn(text)
	})
}

// AddWarning adds a warning to the request's response, if the context can carry one.
func AddWarning(ctx context.Context, text string) {
	if w, ok := ctx.Value(warnKey{}).(func(string)); ok {
		w(text)
	}
}
