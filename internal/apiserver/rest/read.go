package rest

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"kubeos.dev/kube/internal/apiserver/request"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/watchcache"
)

func (c *call) get() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	q := c.r.URL.Query()
	var obj *unstructured.Unstructured
	if rv := q.Get("resourceVersion"); rv != "" {
		// Any version not older than rv: the cache answers.
		min, perr := storage.ParseRevision(rv)
		if perr != nil {
			c.fail(apierrors.NewBadRequest("invalid resourceVersion: " + rv))
			return
		}
		obj, err = c.cache().Get(c.ctx, c.key(), min)
	} else {
		obj, err = c.h.store.Get(c.ctx, c.key())
	}
	if err == nil {
		obj, err = c.fromStorage1(obj)
	}
	if err != nil {
		c.fail(err)
		return
	}
	if c.info.Subresource == "scale" {
		c.writeScale(http.StatusOK, obj)
		return
	}
	c.writeObject(http.StatusOK, obj, out)
}

// writeObject writes one object in the negotiated shape.
func (c *call) writeObject(code int, obj *unstructured.Unstructured, out output) {
	if a := request.AuditFrom(c.ctx); a != nil {
		a.SetObject(obj.GetName(), obj.GetNamespace(), string(obj.GetUID()), obj.GetResourceVersion())
		a.SetResponseObject(obj.Object)
		if phase, ok, _ := unstructured.NestedString(obj.Object, "status", "phase"); ok {
			a.SetPhase(phase)
		}
	}
	switch out {
	case outTable:
		writeJSON(c.w, code, c.table([]*unstructured.Unstructured{obj}, metav1.ListMeta{ResourceVersion: obj.GetResourceVersion()}, true))
	case outPartial:
		writeJSON(c.w, code, partial(obj))
	case outPartialProtobuf:
		c.writePartialProto(code, obj)
	case outProtobuf:
		c.writeProto(code, obj)
	default:
		writeJSON(c.w, code, obj.Object)
	}
}

// listParams are the parsed query parameters of a list or watch.
type listParams struct {
	pred              storage.Predicate
	rv                string
	rvMatch           string
	limit             int64
	cont              string
	sendInitialEvents *bool
	bookmarks         bool
	timeout           time.Duration
}

func (c *call) parseListParams(q url.Values) (*listParams, error) {
	p := &listParams{rv: q.Get("resourceVersion"), rvMatch: q.Get("resourceVersionMatch"), cont: q.Get("continue")}
	p.pred.Attrs = c.kind.AttrFunc()
	if s := q.Get("labelSelector"); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, apierrors.NewBadRequest("unable to parse requirement: " + err.Error())
		}
		p.pred.Label = sel
	}
	if s := q.Get("fieldSelector"); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid field selector: " + err.Error())
		}
		_, supported := c.kind.AttrFunc()(&unstructured.Unstructured{Object: map[string]any{}})
		for _, r := range sel.Requirements() {
			if _, ok := supported[r.Field]; !ok {
				return nil, apierrors.NewBadRequest("field label not supported: " + r.Field)
			}
			if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals && r.Operator != selection.NotEquals {
				return nil, apierrors.NewBadRequest("invalid field selector operator: " + string(r.Operator))
			}
		}
		p.pred.Field = sel
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, apierrors.NewBadRequest("invalid limit: " + s)
		}
		p.limit = n
	}
	if p.rv != "" {
		if _, err := storage.ParseRevision(p.rv); err != nil {
			return nil, apierrors.NewBadRequest("invalid resourceVersion: " + p.rv)
		}
	}
	switch p.rvMatch {
	case "", string(metav1.ResourceVersionMatchNotOlderThan), string(metav1.ResourceVersionMatchExact):
	default:
		return nil, invalid(c, "resourceVersionMatch", p.rvMatch, "must be NotOlderThan or Exact")
	}
	if p.rvMatch != "" && p.rv == "" && q.Get("sendInitialEvents") == "" {
		return nil, invalid(c, "resourceVersionMatch", p.rvMatch, "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if p.rvMatch == string(metav1.ResourceVersionMatchExact) && p.rv == "0" {
		return nil, invalid(c, "resourceVersionMatch", p.rvMatch, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
	}
	if p.cont != "" && p.rv != "" && p.rv != "0" {
		return nil, invalid(c, "resourceVersion", p.rv, "specifying resource version is not allowed when using continue")
	}
	if s := q.Get("sendInitialEvents"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid sendInitialEvents: " + s)
		}
		p.sendInitialEvents = &b
	}
	if s := q.Get("allowWatchBookmarks"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid allowWatchBookmarks: " + s)
		}
		p.bookmarks = b
	}
	if s := q.Get("timeoutSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, apierrors.NewBadRequest("invalid timeoutSeconds: " + s)
		}
		p.timeout = time.Duration(n) * time.Second
	}
	return p, nil
}

func invalid(c *call, fld, value, msg string) error {
	return apierrors.NewInvalid(c.kind.GVK().GroupKind(), "", fieldErrs(fld, value, msg))
}

func (c *call) list() {
	out, err := c.negotiate()
	if err != nil {
		c.fail(err)
		return
	}
	p, err := c.parseListParams(c.r.URL.Query())
	if err != nil {
		c.fail(err)
		return
	}
	res, err := c.readList(p)
	if err == nil {
		res.Items, err = c.fromStorage(res.Items)
	}
	if err != nil {
		c.fail(err)
		return
	}
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(res.Revision, 10), Continue: res.Continue, RemainingItemCount: res.RemainingItemCount}
	c.writeListAs(out, lm, res.Items)
}

// writeListAs writes a list in the negotiated output.
func (c *call) writeListAs(out output, lm metav1.ListMeta, objs []*unstructured.Unstructured) {
	switch out {
	case outTable:
		writeJSON(c.w, http.StatusOK, c.table(objs, lm, false))
	case outPartial:
		items := make([]any, len(objs))
		for i, o := range objs {
			items[i] = partial(o)
		}
		writeJSON(c.w, http.StatusOK, map[string]any{"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": lm, "items": items})
	case outPartialProtobuf:
		c.writePartialProtoList(lm, objs)
	case outProtobuf:
		c.writeProtoList(lm, objs)
	default:
		c.writeList(lm, objs)
	}
}

// readList reads a list from the cache or from etcd, as kube-apiserver decides: exact
// revisions, continuations and paged consistent reads go to etcd; the rest is served from
// memory (a consistent read after a progress fence).
func (c *call) readList(p *listParams) (*storage.ListResult, error) {
	prefix := c.listPrefix()
	rev, _ := storage.ParseRevision(p.rv)
	switch {
	case p.cont != "":
		return c.h.store.List(c.ctx, prefix, storage.ListOptions{Continue: p.cont, Limit: p.limit, Predicate: p.pred})
	case p.rvMatch == string(metav1.ResourceVersionMatchExact) || (p.limit > 0 && p.rv != "" && p.rv != "0"):
		return c.h.store.List(c.ctx, prefix, storage.ListOptions{Revision: rev, Exact: true, Limit: p.limit, Predicate: p.pred})
	case p.rv == "" && p.limit > 0:
		return c.h.store.List(c.ctx, prefix, storage.ListOptions{Limit: p.limit, Predicate: p.pred})
	}
	return c.cache().List(c.ctx, prefix, watchcache.ListOptions{Revision: rev, Consistent: p.rv == "", Predicate: p.pred})
}

// writeList streams a list without building one big value: the items are encoded one by one.
func (c *call) writeList(lm metav1.ListMeta, items []*unstructured.Unstructured) {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	head, _ := json.Marshal(map[string]any{"kind": c.kind.ListKind, "apiVersion": c.kind.APIVersion(), "metadata": lm})
	buf := make([]byte, 0, 64*1024)
	buf = append(buf, head[:len(head)-1]...)
	buf = append(buf, `,"items":[`...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = appendJSON(buf, it.Object); err != nil {
			c.h.log.Error("encode list item", "err", err)
			buf = append(buf, "{}"...)
		}
		if len(buf) > 48*1024 {
			if _, err := c.w.Write(buf); err != nil {
				return
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, "]}\n"...)
	c.w.Write(buf)
}

// partial is the PartialObjectMetadata of obj.
func partial(obj *unstructured.Unstructured) map[string]any {
	return map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.Object["metadata"]}
}

// watchTimeout is how long a watch lasts.
func (c *call) watchTimeout(p *listParams) time.Duration {
	if p.timeout > 0 {
		return p.timeout
	}
	return c.h.minWT + time.Duration(rand.Int64N(int64(c.h.minWT)))
}
