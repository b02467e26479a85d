package rest

import "kubeos.dev/kube/internal/watchcache"

// cache is the watch cache of the call's resource, indexing the kind's IndexedFields. Every
// read of a kind's cache should come through here, so that whichever request starts the
// cache starts it with its indexes (one that lacks them builds them when first asked).
func (c *call) cache() *watchcache.Cache {
	return c.h.caches.Get(c.kind.Prefix(), c.kind.AttrFunc(), c.kind.IndexedFields...)
}
