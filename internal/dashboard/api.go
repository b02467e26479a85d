package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/ctl/opsapi"
)

// Group is the API group of the lifecycle-managed kinds the ops API reports on.
const Group = "kubeos.dev"

// getJSON GETs an API path as the user and decodes the JSON answer into out. A non-2xx
// answer becomes the API's Status as an error (apierrors.IsForbidden and the like work on
// it).
func (u *user) getJSON(ctx context.Context, path string, params url.Values, gr schema.GroupResource, name string, out any) error {
	c, err := rest.HTTPClientFor(u.cfg)
	if err != nil {
		return err
	}
	if len(params) > 0 {
		path += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.Host+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		var st metav1.Status
		if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" {
			return &apierrors.StatusError{ErrStatus: st}
		}
		return apierrors.NewGenericServerResponse(res.StatusCode, http.MethodGet, gr, name, string(raw), 0, false)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s: %w", gr.String(), err)
	}
	return nil
}

// listPage is one page (limit, continue) of a kind's list in namespace ("" all), in the
// API's (name) order.
func (u *user) listPage(ctx context.Context, k *kindInfo, namespace string, limit int, cont string) (*listPage, error) {
	path := "/apis/" + k.GVR.Group + "/" + k.GVR.Version
	if namespace != "" {
		path += "/namespaces/" + url.PathEscape(namespace)
	}
	path += "/" + k.GVR.Resource
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cont != "" {
		q.Set("continue", cont)
	}
	var p listPage
	return &p, u.getJSON(ctx, path, q, k.GVR.GroupResource(), "", &p)
}

// objects is one page of a kind's objects in namespace ("" all), filtered and sorted by the
// server (the ops API's objects resource: it reads its informer copies after authorizing a
// list of the kind there as the user).
func (u *user) objects(ctx context.Context, k *kindInfo, namespace string, q listQuery) (*opsapi.ObjectList, error) {
	p := url.Values{"kind": {k.Kind}, "limit": {strconv.Itoa(q.Size)}, "offset": {strconv.Itoa(q.Page * q.Size)}}
	for key, v := range map[string]string{"phase": q.Phase, "q": q.Text, "sort": q.Sort} {
		if v != "" {
			p.Set(key, v)
		}
	}
	var l opsapi.ObjectList
	return &l, u.ops(ctx, namespace, opsapi.ResourceObjects, "", p, &l)
}

// ops reads one of the ops API's virtual resources (internal/ctl/opsapi) as the user.
func (u *user) ops(ctx context.Context, namespace, resource, name string, params url.Values, out any) error {
	p := "/apis/" + opsapi.Group + "/" + opsapi.Version
	if namespace != "" {
		p += "/namespaces/" + url.PathEscape(namespace)
	}
	p += "/" + resource
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return u.getJSON(ctx, p, params, schema.GroupResource{Group: opsapi.Group, Resource: resource}, name, out)
}

// health is the ops API's health list in namespace ("" all); kind narrows it to one kind.
func (u *user) health(ctx context.Context, namespace, kind string) (*opsapi.HealthList, error) {
	var l opsapi.HealthList
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	return &l, u.ops(ctx, namespace, opsapi.ResourceHealths, "", q, &l)
}

// graph is the ops API's dependency walk from one object.
func (u *user) graph(ctx context.Context, kind, namespace, name, direction string) (*opsapi.Graph, error) {
	var g opsapi.Graph
	return &g, u.ops(ctx, namespace, opsapi.ResourceGraphs, name, url.Values{"kind": {kind}, "direction": {direction}}, &g)
}

// auditOf is the ops API's audit entries about one UID.
func (u *user) auditOf(ctx context.Context, namespace, uid string, since time.Time, limit int) (*opsapi.AuditList, error) {
	var l opsapi.AuditList
	q := url.Values{"uid": {uid}, "limit": {fmt.Sprint(limit)}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	return &l, u.ops(ctx, namespace, opsapi.ResourceAuditEvents, "", q, &l)
}

// version is the preferred version of a group, from discovery (as the user), cached a
// minute: a kind served under a new version appears without a restart.
func (d *Dashboard) version(ctx context.Context, u *user, group string) (string, error) {
	d.versionsMu.Lock()
	e, ok := d.versions[group]
	d.versionsMu.Unlock()
	if ok && d.o.Now().Sub(e.at) < time.Minute {
		return e.version, nil
	}
	cs, err := u.clientset()
	if err != nil {
		return "", err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis", group).Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	var g metav1.APIGroup
	if err := json.Unmarshal(raw, &g); err != nil {
		return "", fmt.Errorf("decode discovery of %s: %w", group, err)
	}
	v := g.PreferredVersion.Version
	if v == "" && len(g.Versions) > 0 {
		v = g.Versions[0].Version
	}
	if v == "" {
		return "", fmt.Errorf("group %s serves no version", group)
	}
	d.versionsMu.Lock()
	d.versions[group] = versionEntry{version: v, at: d.o.Now()}
	d.versionsMu.Unlock()
	return v, nil
}

// kindInfo is one lifecycle-managed kind, as the health list names it.
type kindInfo struct {
	Kind, Resource string
	Namespaced     bool
	GVR            schema.GroupVersionResource
}

// kindOf resolves a resource name to its kind through the ops API's health list (the type
// registry: whatever the engine manages) and discovery.
func (d *Dashboard) kindOf(ctx context.Context, u *user, resource, namespace string) (*kindInfo, *opsapi.KindHealth, error) {
	l, err := u.health(ctx, namespace, resource)
	if err != nil {
		return nil, nil, err
	}
	var kh *opsapi.KindHealth
	for i := range l.Items {
		if l.Items[i].Resource == resource {
			kh = &l.Items[i]
		}
	}
	if kh == nil {
		for _, h := range l.Hidden {
			return nil, nil, fmt.Errorf("%w: %s", errHidden, h.Reason)
		}
		return nil, nil, fmt.Errorf("%w: %s", errNoKind, resource)
	}
	v, err := d.version(ctx, u, Group)
	if err != nil {
		return nil, nil, err
	}
	return &kindInfo{Kind: kh.Kind, Resource: kh.Resource, Namespaced: kh.Namespaced,
		GVR: schema.GroupVersionResource{Group: Group, Version: v, Resource: kh.Resource}}, kh, nil
}
