package server

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/ctl/listing"
	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// maxObjectsPage bounds ?limit of the objects resource.
const maxObjectsPage = 500

// opsObjects answers one page of a lifecycle-managed kind's objects in namespace ("" all),
// filtered and sorted on the server: ?kind=K (required), phase, q (text), sort (name, age,
// phase, ready; "-" reverses), limit (default 50, at most 500), offset. It reads the lifecycle
// informer cache the engine tracks (no storage read), after the same authorization a list of
// the kind in that scope needs, as the requesting user: what a page shows is what that list
// would show.
func (s *Server) opsObjects(ctx context.Context, a *opsAuthz, namespace string, q map[string][]string) (*opsapi.ObjectList, *apierrors.StatusError) {
	get := func(k string) string { return queryValue(q, k) }
	meta, serr := queryKind(get("kind"))
	if serr != nil {
		return nil, serr
	}
	if namespace != "" && !meta.namespaced {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s is cluster-scoped: list it without a namespace", meta.kind))
	}
	lq := listing.Query{Phase: get("phase"), Text: get("q"), Sort: get("sort"), Size: 50}
	if !listing.ValidSort(lq.Sort) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("sort %q: want one of %v, optionally with a leading -", lq.Sort, listing.SortKeys))
	}
	offset := 0
	for key, dst := range map[string]*int{"limit": &lq.Size, "offset": &offset} {
		v := get(key)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (key == "limit" && (n == 0 || n > maxObjectsPage)) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s %q: want an integer (limit 1 to %d, offset from 0)", key, v, maxObjectsPage))
		}
		*dst = n
	}
	if !a.allowed("list", v1alpha1.Group, meta.resource, namespace, "") {
		where := " at the cluster scope"
		if namespace != "" {
			where = " in the namespace \"" + namespace + "\""
		}
		return nil, apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.Group, Resource: meta.resource}, "",
			fmt.Errorf("user %q cannot list resource %q in API group %q%s", a.u.Name, meta.resource, v1alpha1.Group, where))
	}
	lc := s.lifecycle
	select {
	case <-lc.tracking:
	default:
		return nil, apierrors.NewServiceUnavailable("the lifecycle informer cache is not synced yet")
	}
	obj, err := lc.scheme.New(v1alpha1.SchemeGroupVersion.WithKind(meta.kind + "List"))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%sList is not a list", meta.kind))
	}
	// The cache's own objects, not copies: read-only here, and only for the page's rows.
	if err := lc.reader.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var rows []listing.Row
	err = apimeta.EachListItem(list, func(o runtime.Object) error {
		lo, ok := o.(lifecycle.Object)
		if !ok {
			return fmt.Errorf("%T is not a lifecycle-managed object", o)
		}
		st := lo.LifecycleStatus()
		rows = append(rows, listing.NewRow(lo.GetNamespace(), lo.GetName(), lo.GetCreationTimestamp().Time, lo.GetDeletionTimestamp() != nil,
			string(st.Phase), st.Conditions))
		return nil
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	page, matched := listing.Select(rows, listing.Query{Phase: lq.Phase, Text: lq.Text, Sort: lq.Sort})
	out := &opsapi.ObjectList{TypeMeta: opsTypeMeta("ObjectList"), ObjectKind: meta.kind, Namespace: namespace, Matched: matched,
		Offset: offset, Items: []opsapi.ObjectRow{}}
	if offset < len(page) {
		page = page[offset:min(offset+lq.Size, len(page))]
	} else {
		page = nil
	}
	for _, r := range page {
		out.Items = append(out.Items, opsapi.ObjectRow{Namespace: r.Namespace, Name: r.Name, Phase: r.Phase, Ready: r.Ready,
			Reason: r.Reason, Message: r.Message, Conditions: r.Conditions, CreationTimestamp: metav1.NewTime(r.Created), Deleting: r.Deleting})
	}
	return out, nil
}
