package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

func (c *call) watch() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	q := c.r.URL.Query()
	if c.info.Name != "" {
		// A watch on one object is a watch with a metadata.name field selector.
		fs := "metadata.name=" + c.info.Name
		if s := q.Get("fieldSelector"); s != "" {
			fs += "," + s
		}
		q.Set("fieldSelector", fs)
	}
	p, err := c.parseListParams(q)
	if err != nil {
		c.fail(err)
		return
	}
	rev, _ := storage.ParseRevision(p.rv)
	o := watchcache.WatchOptions{Predicate: p.pred, Bookmarks: p.bookmarks}
	initialEnd := false
	switch {
	case p.sendInitialEvents != nil && *p.sendInitialEvents:
		if p.rvMatch != string(metav1.ResourceVersionMatchNotOlderThan) {
			c.fail(invalid(c, "resourceVersionMatch", p.rvMatch, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
			return
		}
		if !p.bookmarks {
			c.fail(invalid(c, "allowWatchBookmarks", "false", "sendInitialEvents requires allowWatchBookmarks=true"))
			return
		}
		o.SendInitialEvents, o.Revision, o.Consistent = true, rev, p.rv == ""
		initialEnd = true
	case p.sendInitialEvents != nil:
		// sendInitialEvents=false: only changes after the given version.
		if p.rv == "" || p.rv == "0" {
			// The revision of the cluster that holds the resource (--etcd-servers-overrides).
			if rev, err = c.h.store.For(c.listPrefix()).CurrentRevision(c.ctx); err != nil {
				c.fail(err)
				return
			}
		}
		o.Revision = rev
	case p.rv == "" || p.rv == "0":
		// Start with the current state as ADDED events, then changes.
		o.SendInitialEvents, o.Consistent = true, p.rv == ""
	default:
		o.Revision = rev
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.watchTimeout(p))
	defer cancel()
	wt, err := c.cache().Watch(ctx, c.listPrefix(), o)
	if err != nil {
		c.fail(err)
		return
	}
	defer wt.Stop()
	if g := c.h.openWatches; g != nil {
		g.WithLabelValues(c.kind.Resource).Inc()
		defer g.WithLabelValues(c.kind.Resource).Dec()
	}

	h := c.w.Header()
	if out == outProtobuf || out == outPartialProtobuf {
		h.Set("Content-Type", protobufType+";stream=watch")
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Cache-Control", "no-cache, private")
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	if err := rc.Flush(); err != nil {
		return
	}
	// The memo key names everything the encoding depends on: events of one cache are shared
	// by watchers of every version of the resource.
	format := c.kind.APIVersion() + ";json"
	encode := c.encodeEvent(false)
	switch out {
	case outPartial:
		format = "meta.k8s.io/v1;partial"
		encode = c.encodeEvent(true)
	case outProtobuf:
		format = c.kind.APIVersion() + ";protobuf"
		encode = c.encodeProtoEvent
	case outPartialProtobuf:
		format = "meta.k8s.io/v1;partial;protobuf"
		encode = c.encodePartialProtoEvent
	}
	firstTable := true
	unflushed := false // frames written since the last flush
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.h.done:
			return
		case ev, ok := <-wt.ResultChan():
			if !ok {
				return
			}
			if ev.Type == storage.ErrorEvent && errors.Is(ev.Err, watchcache.ErrTooSlow) {
				// kube-apiserver ends a watch that does not keep up by closing it, without an
				// error: client-go's reflector then watches again from the last
				// resourceVersion it saw, which the cache's window serves. An error event
				// (a 500) would make it re-list the whole resource.
				if unflushed {
					_ = rc.Flush()
				}
				return
			}
			var frame []byte
			switch {
			case ev.Type == storage.Bookmark && ev.InitialEventsEnd && !initialEnd:
				// only asked-for initial-events markers reach the client
			case ev.Type == storage.Bookmark && !ev.InitialEventsEnd && !p.bookmarks:
			case out == outTable && ev.Type != storage.Bookmark && ev.Type != storage.ErrorEvent:
				frame = c.tableFrame(ev, firstTable)
				firstTable = false
			default:
				frame, err = ev.Encoded(format, encode)
				if err != nil {
					c.h.log.Error("encode watch event", "err", err)
					return
				}
			}
			if frame != nil {
				if _, err := c.w.Write(frame); err != nil {
					return
				}
				unflushed = true
			}
			// Flush once nothing more is queued, also when the last queued event was one
			// that is not sent (it must not hold back the frames before it).
			if unflushed && len(wt.ResultChan()) == 0 {
				if err := rc.Flush(); err != nil {
					return
				}
				unflushed = false
			}
			if ev.Type == storage.ErrorEvent {
				return
			}
		}
	}
}

// encodeEvent encodes a watch event frame; the cache memoises it per format so an event
// fanned out to many watchers is encoded once.
func (c *call) encodeEvent(metadataOnly bool) func(ev *watchcache.Event) ([]byte, error) {
	kind, apiVersion := c.kind.Kind, c.kind.APIVersion()
	if metadataOnly {
		kind, apiVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	}
	return func(ev *watchcache.Event) ([]byte, error) {
		var obj any
		typ := string(ev.Type)
		switch ev.Type {
		case storage.Bookmark:
			obj = map[string]any{"kind": kind, "apiVersion": apiVersion, "metadata": bookmarkMetadata(ev)}
		case storage.ErrorEvent:
			obj = eventStatus(ev.Err)
		case storage.Added, storage.Modified, storage.Deleted:
			if metadataOnly && ev.Object.GetAPIVersion() == c.kind.APIVersion() {
				// Already in the asked-for version: no conversion could change the
				// metadata, and read-time defaulting touches only the body.
				obj = partial(ev.Object)
				break
			}
			o, err := c.fromStorageDetached(ev.Object)
			if err != nil {
				obj, typ = eventStatus(err), string(storage.ErrorEvent)
				break
			}
			if metadataOnly {
				obj = partial(o)
			} else {
				obj = o.Object
			}
		}
		b := make([]byte, 0, 1024)
		b = append(b, `{"type":`...)
		b = appendString(b, typ)
		b = append(b, `,"object":`...)
		b, err := appendJSON(b, obj)
		if err != nil {
			return nil, err
		}
		return append(b, '}', '\n'), nil
	}
}

// bookmarkMetadata is the metadata of a bookmark's object: the revision, and the
// initial-events-end annotation on the bookmark that ends a watch's initial events.
func bookmarkMetadata(ev *watchcache.Event) map[string]any {
	md := map[string]any{"resourceVersion": strconv.FormatInt(ev.Revision, 10)}
	if ev.InitialEventsEnd {
		md["annotations"] = map[string]any{metav1.InitialEventsAnnotationKey: "true"}
	}
	return md
}

func eventStatus(err error) metav1.Status {
	var se *apierrors.StatusError
	if errors.Is(err, storage.ErrCompacted) {
		se = apierrors.NewResourceExpired(err.Error())
	} else {
		se = apierrors.NewInternalError(err)
		if err != nil {
			se.ErrStatus.Message = err.Error()
		}
	}
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return st
}

// tableFrame encodes a watch event whose object is a one-row Table; only the first carries
// the column definitions, as kube-apiserver does.
func (c *call) tableFrame(ev *watchcache.Event, withColumns bool) []byte {
	o, err := c.fromStorageDetached(ev.Object)
	if err != nil {
		b, _ := json.Marshal(map[string]any{"type": "ERROR", "object": eventStatus(err)})
		return append(b, '\n')
	}
	t := c.table([]*unstructured.Unstructured{o}, metav1.ListMeta{ResourceVersion: strconv.FormatInt(ev.Revision, 10)}, true)
	if !withColumns {
		delete(t, "columnDefinitions")
	}
	b, _ := json.Marshal(map[string]any{"type": string(ev.Type), "object": t})
	return append(b, '\n')
}
