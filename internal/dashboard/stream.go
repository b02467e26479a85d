package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Stream timing: changes are coalesced for coalesce before one event goes out; a comment
// line every heartbeat keeps proxies from closing an idle stream.
const (
	coalesce  = 250 * time.Millisecond
	heartbeat = 20 * time.Second
)

// change is the data of a "change" event: how many changes were coalesced and the last.
type change struct {
	Count     int    `json:"count"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	Phase     string `json:"phase,omitempty"`
}

// stream is the one server-sent-event stream of a page: the server watches, as the user,
// what the page shows (view=health: every lifecycle kind in the scope; kind: that kind;
// object: every lifecycle kind in the object's namespace) and sends a "change" event when
// something changed; the page then fetches its content again. 401 when the credential is
// refused (the page stops); what the user may not watch is left out.
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r.Context())
	ctx := r.Context()
	q := r.URL.Query()
	view, ns, resource := q.Get("view"), q.Get("ns"), q.Get("resource")
	var kinds []kindInfo
	switch view {
	case "health", "object":
		l, err := u.health(ctx, ns, "")
		if err != nil {
			d.streamError(w, r, u, err)
			return
		}
		v, err := d.version(ctx, u, Group)
		if err != nil {
			d.streamError(w, r, u, err)
			return
		}
		for _, it := range l.Items {
			kinds = append(kinds, kindInfo{Kind: it.Kind, Resource: it.Resource, Namespaced: it.Namespaced,
				GVR: schema.GroupVersionResource{Group: Group, Version: v, Resource: it.Resource}})
		}
	case "kind":
		k, _, err := d.kindOf(ctx, u, resource, ns)
		if err != nil {
			d.streamError(w, r, u, err)
			return
		}
		kinds = append(kinds, *k)
	default:
		http.Error(w, "view: want health, kind or object", http.StatusBadRequest)
		return
	}
	dc, err := u.dynamic()
	if err != nil {
		d.streamError(w, r, u, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes := make(chan change, 64)
	denied := make(chan struct{})
	var deniedOnce sync.Once
	var wg sync.WaitGroup
	watching := 0
	for _, k := range kinds {
		scope := ns
		if !k.Namespaced {
			scope = ""
		}
		var ri dynamic.ResourceInterface = dc.Resource(k.GVR)
		if scope != "" {
			ri = dc.Resource(k.GVR).Namespace(scope)
		}
		// The list's resourceVersion starts the watch at now (no ADDED flood of what the
		// page already shows); it also says whether the user may read the kind here.
		l, err := ri.List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsUnauthorized(err) {
			d.streamError(w, r, u, err)
			return
		}
		if err != nil {
			continue
		}
		watching++
		wg.Add(1)
		go func(k kindInfo, rv string) {
			defer wg.Done()
			if err := watchKind(ctx, ri, k.Kind, rv, changes); apierrors.IsUnauthorized(err) {
				deniedOnce.Do(func() { close(denied) })
			}
		}(k, l.GetResourceVersion())
	}
	defer wg.Wait()
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: ready\ndata: {\"watching\":%d}\n\n", watching)
	flusher.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	var pending *change
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-denied:
			// The credential stopped working: end the stream; the page's reconnect gets 401.
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case c := <-changes:
			if pending == nil {
				pending = &change{}
				flush = time.After(coalesce)
			}
			n := pending.Count + 1
			*pending = c
			pending.Count = n
		case <-flush:
			b, _ := json.Marshal(pending)
			pending, flush = nil, nil
			if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// watchKind watches one kind from rv until ctx ends, re-watching when the server ends a
// watch and re-listing when rv expired, sending what changed.
func watchKind(ctx context.Context, ri dynamic.ResourceInterface, kind, rv string, out chan<- change) error {
	backoff := time.Second
	for ctx.Err() == nil {
		wi, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if apierrors.IsUnauthorized(err) {
			return err
		}
		if err != nil {
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		expired := false
		for ev := range wi.ResultChan() {
			switch ev.Type {
			case watch.Bookmark:
				if o, ok := ev.Object.(*unstructured.Unstructured); ok {
					rv = o.GetResourceVersion()
				}
				continue
			case watch.Error:
				expired = true
				continue
			}
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			c := change{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), Type: string(ev.Type), Phase: rowOf(o).Phase}
			select {
			case out <- c:
			case <-ctx.Done():
				wi.Stop()
				return nil
			}
		}
		wi.Stop()
		if expired {
			l, err := ri.List(ctx, metav1.ListOptions{Limit: 1})
			if apierrors.IsUnauthorized(err) {
				return err
			}
			if err != nil {
				if !sleep(ctx, backoff) {
					return nil
				}
				continue
			}
			rv = l.GetResourceVersion()
			select { // what happened meanwhile is unknown: the page refreshes
			case out <- change{Kind: kind, Type: "RELISTED"}:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// streamError answers a stream that cannot start: 401 (the page stops trying) or the
// API's status code without a body worth rendering.
func (d *Dashboard) streamError(w http.ResponseWriter, r *http.Request, u *user, err error) {
	if apierrors.IsUnauthorized(err) {
		if u.sessionID != "" {
			d.sessions.remove(u.sessionID)
		}
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	code := http.StatusBadGateway
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Code >= 400 {
		code = int(se.Status().Code)
	}
	http.Error(w, http.StatusText(code), code)
}
