package aggregator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	openapiaggregator "k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/apiserver/openapi"
)

// openAPIRefresh is how often an extension server's documents are downloaded again while
// its APIService is unchanged; the download sends the ETag (v2) or compares the hash in the
// index (v3), so an unchanged document costs a 304 or nothing.
const openAPIRefresh = time.Minute

// A failed download is tried again after openAPIRetryMin, doubling to openAPIRetryMax
// while it keeps failing (sooner when the APIService changes).
const (
	openAPIRetryMin = 10 * time.Second
	openAPIRetryMax = 10 * time.Minute
)

// openAPIRetry is when a remote whose download failed is tried again.
type openAPIRetry struct {
	transport *http.Transport
	delay     time.Duration
	after     time.Time
}

// openAPITimeout bounds one APIService's downloads; openAPIMaxBytes one document.
const (
	openAPITimeout  = 30 * time.Second
	openAPIMaxBytes = 64 << 20
)

// openAPIDoc is one APIService's documents as last downloaded; never changed once stored.
type openAPIDoc struct {
	// transport is the remote's when downloaded: a remote with a new one (its spec
	// changed) is downloaded again at once.
	transport *http.Transport
	spec      remoteSpec
	fetched   time.Time

	v2     *spec.Swagger // filtered to the group-version's paths
	v2Etag string
	// v3URL is the server-relative URL (with its hash) v3 was read from; v3Etag is its
	// version.
	v3URL  string
	v3     *spec3.OpenAPI
	v3Etag string
}

// remoteSpec is what orders an APIService's documents.
type remoteSpec struct {
	name                                  string
	gv                                    schema.GroupVersion
	groupPriorityMinimum, versionPriority int32
}

var _ openapi.Remote = (*Aggregator)(nil)

// OpenAPIGeneration changes whenever OpenAPIDocuments would answer differently.
func (a *Aggregator) OpenAPIGeneration() uint64 { return a.openAPIGen.Load() }

// OpenAPIDocuments are the documents last downloaded from the remote APIServices' servers,
// the most preferred first (groupPriorityMinimum, then versionPriority, highest first). A
// server's documents stay, as kube-aggregator keeps its last successful download, until its
// APIService is deleted or no longer names a service.
func (a *Aggregator) OpenAPIDocuments() []openapi.RemoteDocument {
	a.mu.RLock()
	docs := make([]*openAPIDoc, 0, len(a.docs))
	for _, d := range a.docs {
		docs = append(docs, d)
	}
	a.mu.RUnlock()
	slices.SortFunc(docs, func(x, y *openAPIDoc) int {
		if x.spec.groupPriorityMinimum != y.spec.groupPriorityMinimum {
			return int(y.spec.groupPriorityMinimum - x.spec.groupPriorityMinimum)
		}
		if x.spec.gv.Group != y.spec.gv.Group {
			return strings.Compare(x.spec.gv.Group, y.spec.gv.Group)
		}
		if x.spec.versionPriority != y.spec.versionPriority {
			return int(y.spec.versionPriority - x.spec.versionPriority)
		}
		return strings.Compare(x.spec.name, y.spec.name)
	})
	out := make([]openapi.RemoteDocument, len(docs))
	for i, d := range docs {
		out[i] = openapi.RemoteDocument{GroupVersion: d.spec.gv, V2: d.v2, V3: d.v3, V3Etag: d.v3Etag}
	}
	return out
}

func (a *Aggregator) pokeOpenAPI() {
	select {
	case a.openAPIKick <- struct{}{}:
	default:
	}
}

// openAPILoop downloads the remote documents each time the availability check asks (after
// every check) until ctx ends.
func (a *Aggregator) openAPILoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.openAPIKick:
		}
		a.syncOpenAPI(ctx, time.Now())
	}
}

// syncOpenAPI downloads the documents of every available remote that has none yet, whose
// APIService changed, or whose last download is older than openAPIRefresh; and forgets
// those of remotes that are gone.
func (a *Aggregator) syncOpenAPI(ctx context.Context, now time.Time) {
	a.mu.RLock()
	remotes := make(map[schema.GroupVersion]*remote, len(a.remotes))
	for gv, rm := range a.remotes {
		remotes[gv] = rm
	}
	a.mu.RUnlock()
	for gv, rm := range remotes {
		if rm.resources == nil {
			continue // not available: keep what was downloaded last
		}
		a.mu.RLock()
		cur := a.docs[gv]
		a.mu.RUnlock()
		if cur != nil && cur.transport == rm.transport && now.Sub(cur.fetched) < openAPIRefresh {
			continue
		}
		retry, failed := a.openAPIRetries[gv]
		if failed && retry.transport == rm.transport && now.Before(retry.after) {
			continue
		}
		target, err := a.resolve(rm.svc)
		var next *openAPIDoc
		if err == nil {
			next, err = a.download(ctx, target, rm, cur, now)
		}
		if err != nil {
			if ctx.Err() == nil {
				a.opts.Log.Warn("aggregator: OpenAPI download", "apiservice", rm.svc.Name, "err", err)
			}
			if !failed || retry.transport != rm.transport {
				retry = openAPIRetry{transport: rm.transport}
			}
			retry.delay = min(max(2*retry.delay, openAPIRetryMin), openAPIRetryMax)
			retry.after = now.Add(retry.delay)
			a.openAPIRetries[gv] = retry
			continue
		}
		delete(a.openAPIRetries, gv)
		a.mu.Lock()
		if a.remotes[gv] != nil {
			a.docs[gv] = next
			if cur == nil || next.v2 != cur.v2 || next.v3 != cur.v3 || next.spec != cur.spec {
				a.openAPIGen.Add(1)
			}
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	for gv := range a.docs {
		if a.remotes[gv] == nil {
			delete(a.docs, gv)
			a.openAPIGen.Add(1)
		}
	}
	for gv := range a.openAPIRetries {
		if a.remotes[gv] == nil {
			delete(a.openAPIRetries, gv)
		}
	}
	a.mu.Unlock()
}

// download fetches one APIService's documents from its server at target as
// system:kube-aggregator (front-proxy identity, as the availability check): /openapi/v2
// with the last ETag, then the /openapi/v3 index and, when the group-version's hash
// changed, its document. A server without /openapi/v3 gets a document converted from v2,
// as kube-aggregator does. What did not change is taken from cur.
func (a *Aggregator) download(ctx context.Context, target *url.URL, rm *remote, cur *openAPIDoc, now time.Time) (*openAPIDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, openAPITimeout)
	defer cancel()
	s := rm.svc.Spec
	gv := schema.GroupVersion{Group: s.Group, Version: s.Version}
	next := &openAPIDoc{transport: rm.transport, fetched: now,
		spec: remoteSpec{name: rm.svc.Name, gv: gv, groupPriorityMinimum: s.GroupPriorityMinimum, versionPriority: s.VersionPriority}}
	if cur != nil {
		next.v2, next.v2Etag, next.v3, next.v3URL, next.v3Etag = cur.v2, cur.v2Etag, cur.v3, cur.v3URL, cur.v3Etag
	}
	get := func(path, etag string) (int, []byte, string, error) {
		u := *target
		ref, err := url.Parse(path)
		if err != nil {
			return 0, nil, "", err
		}
		u.Path, u.RawQuery = ref.Path, ref.RawQuery
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, nil, "", err
		}
		req.Header.Set("Accept", "application/json")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		setIdentity(req.Header, "system:kube-aggregator", "", []string{"system:masters"}, nil)
		resp, err := (&http.Client{Transport: rm.transport}).Do(req)
		if err != nil {
			return 0, nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, openAPIMaxBytes+1))
		if err != nil {
			return 0, nil, "", err
		}
		if len(body) > openAPIMaxBytes {
			return 0, nil, "", fmt.Errorf("%s: larger than %d bytes", path, openAPIMaxBytes)
		}
		return resp.StatusCode, body, resp.Header.Get("Etag"), nil
	}

	// v2: the paths of the group-version and the definitions they use.
	code, body, etag, err := get("/openapi/v2", next.v2Etag)
	if err != nil {
		return nil, err
	}
	switch code {
	case http.StatusNotModified:
	case http.StatusNotFound:
		next.v2, next.v2Etag = nil, ""
	case http.StatusOK:
		if etag == "" {
			sum := sha256.Sum256(body)
			etag = "sha256:" + hex.EncodeToString(sum[:])
		}
		if etag != next.v2Etag || next.v2 == nil {
			var sw spec.Swagger
			if err := sw.UnmarshalJSON(body); err != nil {
				return nil, fmt.Errorf("/openapi/v2: %w", err)
			}
			next.v2 = openapiaggregator.FilterSpecByPathsWithoutSideEffects(&sw, []string{"/apis/" + gv.Group + "/" + gv.Version + "/"})
			next.v2Etag = etag
		}
	default:
		return nil, fmt.Errorf("/openapi/v2: status %d", code)
	}

	// v3: the group-version's document, when the index lists it.
	code, body, _, err = get("/openapi/v3", "")
	if err != nil {
		return nil, err
	}
	switch code {
	case http.StatusNotFound:
		switch {
		case next.v2 == nil:
			next.v3, next.v3URL, next.v3Etag = nil, "", ""
		case next.v3 == nil || next.v3URL != "" || cur == nil || cur.v2 != next.v2:
			next.v3, next.v3URL, next.v3Etag = openapiconv.ConvertV2ToV3(next.v2), "", "v2:"+next.v2Etag
		}
	case http.StatusOK:
		var index handler3.OpenAPIV3Discovery
		if err := json.Unmarshal(body, &index); err != nil {
			return nil, fmt.Errorf("/openapi/v3: %w", err)
		}
		entry, ok := index.Paths["apis/"+gv.Group+"/"+gv.Version]
		switch {
		case !ok || entry.ServerRelativeURL == "":
			next.v3, next.v3URL, next.v3Etag = nil, "", ""
		case entry.ServerRelativeURL != next.v3URL || next.v3 == nil:
			code, body, _, err := get(entry.ServerRelativeURL, "")
			if err != nil {
				return nil, err
			}
			if code != http.StatusOK {
				return nil, fmt.Errorf("%s: status %d", entry.ServerRelativeURL, code)
			}
			doc := &spec3.OpenAPI{}
			if err := json.Unmarshal(body, doc); err != nil {
				return nil, fmt.Errorf("%s: %w", entry.ServerRelativeURL, err)
			}
			next.v3, next.v3URL, next.v3Etag = doc, entry.ServerRelativeURL, entry.ServerRelativeURL
		}
	default:
		return nil, errors.New("/openapi/v3: status " + fmt.Sprint(code))
	}
	return next, nil
}
