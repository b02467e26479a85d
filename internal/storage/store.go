package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Store is the object store over one etcd client. It is safe for concurrent use.
//
// A store made by WithOverrides keeps some resources in other etcd clusters (see
// Override): every method that takes a key or a prefix reads and writes the cluster that
// holds it; the others (CurrentRevision, RequestProgress, Compact, Client) are about the
// store's own cluster, and For names the store of another one.
type Store struct {
	client      *clientv3.Client
	transformer Transformer
	// compacted is the newest revision this cluster's history is known to be compacted to
	// (CompactRevision); shared by the stores of one cluster.
	compacted *atomic.Int64
	// routes send the keys under a resource's prefix to the store of another cluster.
	routes []route
}

type route struct {
	prefix string // ResourcePrefix of the resource, ending in "/"
	store  *Store
}

// New returns a store that keeps its objects in the cluster client talks to.
func New(client *clientv3.Client) *Store { return &Store{client: client, compacted: new(atomic.Int64)} }

// NewWithTransformer returns a store whose values pass through t on their way to and from
// etcd (encryption at rest). A nil t stores plain JSON.
func NewWithTransformer(client *clientv3.Client, t Transformer) *Store {
	return &Store{client: client, transformer: t, compacted: new(atomic.Int64)}
}

// Client is the etcd client the store uses.
func (s *Store) Client() *clientv3.Client { return s.client }

// Override names the etcd cluster that keeps the objects of one resource instead of the
// store's own, as kube-apiserver's --etcd-servers-overrides: every key under
// ResourcePrefix(Group, Resource), custom resources' included.
type Override struct {
	// Group is the API group ("" for the core group) and Resource the plural name.
	Group, Resource string
	// Client talks to the resource's cluster.
	Client *clientv3.Client
}

// WithOverrides returns a store that keeps each override's resource in the override's
// cluster and everything else in s's; values pass through s's transformer everywhere.
// Overrides with one client share one store, and an override on s's own client changes
// nothing. s itself is unchanged; overrides s has are not kept.
func (s *Store) WithOverrides(overrides ...Override) *Store {
	out := &Store{client: s.client, transformer: s.transformer, compacted: s.compacted}
	byClient := map[*clientv3.Client]*Store{s.client: out}
	for _, o := range overrides {
		st, ok := byClient[o.Client]
		if !ok {
			st = &Store{client: o.Client, transformer: s.transformer, compacted: new(atomic.Int64)}
			byClient[o.Client] = st
		}
		if st != out {
			out.routes = append(out.routes, route{prefix: ResourcePrefix(o.Group, o.Resource), store: st})
		}
	}
	return out
}

// For returns the store of the cluster that holds the keys under prefix (or the key
// prefix): an override's, or s. A prefix above a resource's, such as Prefix itself, is
// s's: a list or watch never spans clusters.
func (s *Store) For(prefix string) *Store {
	for _, r := range s.routes {
		if strings.HasPrefix(prefix, r.prefix) || prefix == r.prefix[:len(r.prefix)-1] {
			return r.store
		}
	}
	return s
}

// CompactRevision is the newest revision s's cluster is known to be compacted to (0: none
// known): what this process's Compactor and Compact did, and what another server's
// Compactor recorded. Revisions below it are gone from etcd, so a cache must not serve them
// (a continue token of a compacted revision expires, as with kube-apiserver).
func (s *Store) CompactRevision() int64 {
	if s.compacted == nil {
		return 0
	}
	return s.compacted.Load()
}

// noteCompacted raises CompactRevision to rev.
func (s *Store) noteCompacted(rev int64) {
	if s.compacted == nil {
		return
	}
	for {
		cur := s.compacted.Load()
		if rev <= cur || s.compacted.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Clusters lists the store of every cluster s uses, s first, each once: what runs per
// cluster (compaction, health checks, a watch cache's revisions) iterates over them.
func (s *Store) Clusters() []*Store {
	out := []*Store{s}
	for _, r := range s.routes {
		if !slices.Contains(out, r.store) {
			out = append(out, r.store)
		}
	}
	return out
}

// Preconditions must hold on the stored object for an update or delete to proceed.
type Preconditions struct {
	UID             types.UID
	ResourceVersion string
}

func (p *Preconditions) check(key string, cur *unstructured.Unstructured) error {
	if p == nil {
		return nil
	}
	if p.UID != "" && p.UID != cur.GetUID() {
		return errorf(ErrConflict, key, "precondition failed: UID in precondition: %s, UID in object meta: %s", p.UID, cur.GetUID())
	}
	if p.ResourceVersion != "" && p.ResourceVersion != cur.GetResourceVersion() {
		return errorf(ErrConflict, key, "precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", p.ResourceVersion, cur.GetResourceVersion())
	}
	return nil
}

// Create stores obj under key unless the key exists (ErrAlreadyExists). It returns obj with
// its resourceVersion set; the store owns obj afterwards.
func (s *Store) Create(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if t := s.For(key); t != s {
		return t.Create(ctx, key, obj)
	}
	plain, err := encode(key, obj)
	if err != nil {
		return nil, err
	}
	data, err := s.seal(ctx, key, plain)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return nil, wrapEtcd(key, err)
	}
	if !resp.Succeeded {
		return nil, &Error{Kind: ErrAlreadyExists, Key: key}
	}
	setRevision(obj, resp.Header.Revision)
	return obj, nil
}

// Get returns the latest state of key, or ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (*unstructured.Unstructured, error) {
	if t := s.For(key); t != s {
		return t.Get(ctx, key)
	}
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return nil, wrapEtcd(key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, &Error{Kind: ErrNotFound, Key: key}
	}
	kv := resp.Kvs[0]
	obj, _, _, err := s.decode(key, kv.Value, kv.ModRevision)
	return obj, err
}

// ListOptions select what List returns.
type ListOptions struct {
	// Revision to read at; 0 reads the latest state.
	Revision int64
	// Exact reads exactly at Revision; otherwise Revision is a lower bound ("not older than")
	// and the latest state is read, failing with ErrFutureRevision if the store is behind.
	Exact bool
	// Limit is the largest number of items to return; 0 means all.
	Limit int64
	// Continue is the token a previous page returned; it fixes the revision.
	Continue string
	// Predicate filters the items.
	Predicate Predicate
}

// ListResult is one page of a list.
type ListResult struct {
	Items []*unstructured.Unstructured
	// Revision the items were read at.
	Revision int64
	// Continue is set when more items may follow; pass it back to read the next page.
	Continue string
	// RemainingItemCount is how many items follow, when known (lists without a predicate).
	RemainingItemCount *int64
}

// List returns the objects whose keys start with prefix (which must end in "/"), sorted by key.
func (s *Store) List(ctx context.Context, prefix string, o ListOptions) (*ListResult, error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if t := s.For(prefix); t != s {
		return t.List(ctx, prefix, o)
	}
	start := prefix
	rev := int64(0)
	if o.Continue != "" {
		var err error
		if start, rev, err = DecodeContinue(o.Continue, prefix); err != nil {
			return nil, err
		}
	} else if o.Exact {
		rev = o.Revision
	}
	end := prefixEnd(prefix)
	pageSize := o.Limit
	if pageSize > 0 && !o.Predicate.Empty() && pageSize < 100 {
		// Filtering may throw most of a page away: read ahead in bigger pages.
		pageSize = 100
	}
	res := &ListResult{}
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if pageSize > 0 {
			opts = append(opts, clientv3.WithLimit(pageSize))
		}
		resp, err := s.client.Get(ctx, start, opts...)
		if err != nil {
			err = wrapEtcdRev(prefix, rev, err)
			var se *Error
			if o.Continue != "" && errors.As(err, &se) && errors.Is(se.Kind, ErrCompacted) {
				// As kube-apiserver: the page's revision is gone, but the list may go on
				// from the same key at the newest revision, inconsistently.
				se.Continue = EncodeContinue(latestRevision, start, prefix)
			}
			return nil, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
			if !o.Exact && o.Revision > rev {
				return nil, &Error{Kind: ErrFutureRevision, Key: prefix, Requested: o.Revision, Current: rev}
			}
		}
		res.Revision = rev
		for i, kv := range resp.Kvs {
			obj, _, _, err := s.decode(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			if !o.Predicate.Matches(obj) {
				continue
			}
			res.Items = append(res.Items, obj)
			if o.Limit > 0 && int64(len(res.Items)) == o.Limit {
				more := resp.More || i < len(resp.Kvs)-1
				if more {
					res.Continue = EncodeContinue(rev, string(kv.Key)+"\x00", prefix)
					if o.Predicate.Empty() {
						n := resp.Count - int64(i) - 1
						res.RemainingItemCount = &n
					}
				}
				return res, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return res, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Count returns how many keys are under prefix, which is taken as a directory as in List: a
// missing final "/" is added, so that namespace "ns1" does not count "ns10".
func (s *Store) Count(ctx context.Context, prefix string) (int64, error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if t := s.For(prefix); t != s {
		return t.Count(ctx, prefix)
	}
	resp, err := s.client.Get(ctx, prefix, clientv3.WithRange(prefixEnd(prefix)), clientv3.WithCountOnly())
	if err != nil {
		return 0, wrapEtcd(prefix, err)
	}
	return resp.Count, nil
}

// CurrentRevision is the latest revision of the store's own cluster (For(prefix) names
// another's), read with a quorum read.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	resp, err := s.client.Get(ctx, compactRevKey)
	if err != nil {
		return 0, wrapEtcd("", err)
	}
	return resp.Header.Revision, nil
}

// UpdateFunc computes the new state of an object from its current state. It receives a copy
// it may change and return. Returning an error aborts the update with that error. For
// GuaranteedUpdate with AllowCreate, cur is nil when the object does not exist.
type UpdateFunc func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error)

// UpdateOptions tune GuaranteedUpdate.
type UpdateOptions struct {
	Preconditions *Preconditions
	// AllowCreate calls the update function with nil and creates the object when the key
	// does not exist, instead of failing with ErrNotFound.
	AllowCreate bool
	// Current is a recent state of the object (from a cache) to try first; a stale one only
	// costs a retry.
	Current *unstructured.Unstructured
}

// GuaranteedUpdate reads key, applies fn and writes the result as a compare-and-swap on the
// key's mod revision, retrying with the fresh state whenever another writer got there first.
// An update that changes nothing is not written and returns the current state. The returned
// object carries the new resourceVersion.
//
// When o.Current is given, it is trusted only as far as a successful write or a confirmed
// no-op: if the preconditions or fn fail on it, the update is retried once on the state read
// from etcd, since the cached copy may simply be stale.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, o UpdateOptions, fn UpdateFunc) (*unstructured.Unstructured, error) {
	if t := s.For(key); t != s {
		return t.GuaranteedUpdate(ctx, key, o, fn)
	}
	var cur *unstructured.Unstructured
	var curData []byte // the plain stored form of cur
	stale := false     // cur was read with a key that is no longer the writing one
	fromCache := false
	if o.Current != nil {
		if data, err := encode(key, o.Current); err == nil {
			cur, curData, fromCache = o.Current, data, true
		}
	}
	// refresh replaces a cached state with the stored one.
	refresh := func() error {
		var err error
		fromCache = false
		cur, curData, stale, err = s.getRaw(ctx, key)
		if err != nil && !(o.AllowCreate && errors.Is(err, ErrNotFound)) {
			return err
		}
		return nil
	}
	if !fromCache {
		if err := refresh(); err != nil {
			return nil, err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var in *unstructured.Unstructured
		var curRev int64
		if cur != nil {
			if err := o.Preconditions.check(key, cur); err != nil {
				if fromCache {
					if err := refresh(); err != nil {
						return nil, err
					}
					continue
				}
				return nil, err
			}
			in = cur.DeepCopy()
			curRev, _ = Revision(cur)
		} else if !o.AllowCreate {
			return nil, &Error{Kind: ErrNotFound, Key: key}
		}
		out, err := fn(in)
		if err != nil {
			if fromCache {
				if err := refresh(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		data, err := encode(key, out)
		if err != nil {
			return nil, err
		}
		if cur != nil && !stale && string(data) == string(curData) {
			// Nothing changed: no write, no new revision (as kube-apiserver).
			if fromCache {
				// Confirm the cached state is still current before claiming success.
				cachedRV := cur.GetResourceVersion()
				if err := refresh(); err != nil {
					return nil, err
				}
				if cur == nil || cur.GetResourceVersion() != cachedRV || stale {
					continue
				}
			}
			setRevision(out, curRev)
			return out, nil
		}
		sealed, err := s.seal(ctx, key, data)
		if err != nil {
			return nil, err
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", curRev)).
			Then(clientv3.OpPut(key, string(sealed))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return nil, wrapEtcd(key, err)
		}
		if resp.Succeeded {
			setRevision(out, resp.Header.Revision)
			return out, nil
		}
		// Someone else wrote first: retry with what is stored now.
		fromCache = false
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			cur, curData = nil, nil
			continue
		}
		if cur, curData, stale, err = s.decode(key, kvs[0].Value, kvs[0].ModRevision); err != nil {
			return nil, err
		}
	}
}

// getRaw reads key and returns the object, its plain stored form and whether it was
// sealed with a key that no longer writes.
func (s *Store) getRaw(ctx context.Context, key string) (*unstructured.Unstructured, []byte, bool, error) {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return nil, nil, false, wrapEtcd(key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, false, &Error{Kind: ErrNotFound, Key: key}
	}
	return s.decode(key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// DeleteOptions tune Delete.
type DeleteOptions struct {
	Preconditions *Preconditions
	// Validate sees the current state just before it is deleted and may refuse.
	Validate func(cur *unstructured.Unstructured) error
}

// Delete removes key if the preconditions hold and returns its last state, whose
// resourceVersion is the revision of the deletion (as kube-apiserver returns it, and as the
// watch's Deleted event carries it).
func (s *Store) Delete(ctx context.Context, key string, o DeleteOptions) (*unstructured.Unstructured, error) {
	if t := s.For(key); t != s {
		return t.Delete(ctx, key, o)
	}
	cur, _, _, err := s.getRaw(ctx, key)
	if err != nil {
		return nil, err
	}
	for {
		if err := o.Preconditions.check(key, cur); err != nil {
			return nil, err
		}
		if o.Validate != nil {
			if err := o.Validate(cur.DeepCopy()); err != nil {
				return nil, err
			}
		}
		rev, _ := Revision(cur)
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return nil, wrapEtcd(key, err)
		}
		if resp.Succeeded {
			setRevision(cur, resp.Header.Revision)
			return cur, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, &Error{Kind: ErrNotFound, Key: key}
		}
		if cur, _, _, err = s.decode(key, kvs[0].Value, kvs[0].ModRevision); err != nil {
			return nil, err
		}
	}
}

type continueToken struct {
	APIVersion string `json:"v"`
	Revision   int64  `json:"rv"`
	Start      string `json:"start"`
	// Prefix is a hash of the listed prefix: a token is refused for any other list, where
	// its start key would mean a different position.
	Prefix uint32 `json:"p"`
}

// EncodeContinue makes the opaque token for a list of prefix that resumes at key start,
// reading at rev.
func EncodeContinue(rev int64, start, prefix string) string {
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", Revision: rev, Start: strings.TrimPrefix(start, prefix), Prefix: prefixHash(prefix)})
	return base64.RawURLEncoding.EncodeToString(b)
}

func prefixHash(prefix string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	return h.Sum32()
}

// DecodeContinue returns the key to resume at and the revision of a token made by
// EncodeContinue for the same prefix; revision 0 for the inconsistent token of an
// ErrCompacted list (Error.Continue): read at the newest revision.
func DecodeContinue(token, prefix string) (start string, rev int64, err error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, errorf(ErrInvalidContinue, "", "not base64: %v", err)
	}
	var t continueToken
	if err := json.Unmarshal(b, &t); err != nil {
		return "", 0, errorf(ErrInvalidContinue, "", "%v", err)
	}
	if t.APIVersion != "meta.k8s.io/v1" || (t.Revision <= 0 && t.Revision != latestRevision) {
		return "", 0, errorf(ErrInvalidContinue, "", "unknown token version or revision")
	}
	if t.Prefix != prefixHash(prefix) {
		return "", 0, errorf(ErrInvalidContinue, "", "the token belongs to another list")
	}
	if strings.Contains(t.Start, "/../") || strings.HasPrefix(t.Start, "../") || strings.HasPrefix(t.Start, "/") {
		return "", 0, errorf(ErrInvalidContinue, "", "start key escapes the listed prefix")
	}
	if t.Revision == latestRevision {
		return prefix + t.Start, 0, nil
	}
	return prefix + t.Start, t.Revision, nil
}

// latestRevision in a continue token reads the next page at the newest revision: the token
// of an ErrCompacted list (kube-apiserver's -1, which a bad token's 0 cannot be mistaken for).
const latestRevision = -1

func wrapEtcd(key string, err error) error {
	return wrapEtcdRev(key, 0, err)
}

func wrapEtcdRev(key string, rev int64, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return &Error{Kind: ErrCompacted, Key: key, Requested: rev}
	case errors.Is(err, rpctypes.ErrFutureRev):
		return &Error{Kind: ErrFutureRevision, Key: key, Requested: rev}
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return errorf(ErrTooLarge, key, "%v", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("etcd %s: %w", key, err)
}
