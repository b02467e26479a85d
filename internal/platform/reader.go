package platform

import (
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheReader is the informer cache drivers read from, supplied once it has synced (Set):
// the server builds the drivers before its lifecycle cache runs. Until then Reader answers
// with the fallback (the direct client), so a driver never waits for it.
type CacheReader struct {
	r atomic.Pointer[client.Reader]
}

// Set supplies the synced cache.
func (c *CacheReader) Set(r client.Reader) { c.r.Store(&r) }

// Reader is the cache once Set, else fallback.
func (c *CacheReader) Reader(fallback client.Reader) client.Reader {
	if p := c.r.Load(); p != nil {
		return *p
	}
	return fallback
}

// Synced reports whether the cache was set.
func (c *CacheReader) Synced() bool { return c.r.Load() != nil }
