package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// ReconcileAnnotation, set to a time, makes the lifecycle engine reconcile the object now.
const ReconcileAnnotation = "kubeos.dev/reconcile"

// actionView is one action button: shown enabled only when a SelfSubjectAccessReview
// allows it, otherwise disabled with the answer to "why can't I".
type actionView struct {
	Name, Label string
	Allowed     bool
	Why         string
	Danger      bool
}

// doneMessages are the notes shown after an action (?done=ACTION; any other value shows
// nothing, so a link cannot put words in the page).
var doneMessages = map[string]string{"delete": "Deletion requested.", "reconcile": "Reconcile requested.",
	"suspend": "Suspended.", "resume": "Resumed."}

// actionSpec is what an action needs the user to be allowed.
type actionSpec struct {
	name, label, verb string
	danger            bool
}

func (d *Dashboard) actionSpecs(k *kindInfo, obj *unstructured.Unstructured) []actionSpec {
	specs := []actionSpec{{name: "reconcile", label: "Reconcile now", verb: "patch"}}
	if d.o.Suspendable(k.GVR.Group, k.Resource) {
		if s, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); s {
			specs = append(specs, actionSpec{name: "resume", label: "Resume", verb: "patch"})
		} else {
			specs = append(specs, actionSpec{name: "suspend", label: "Suspend", verb: "patch"})
		}
	}
	if obj.GetDeletionTimestamp() == nil {
		specs = append(specs, actionSpec{name: "delete", label: "Delete", verb: "delete", danger: true})
	}
	return specs
}

// actions asks the API, as the user, which actions they may take on the object.
func (d *Dashboard) actions(ctx context.Context, u *user, k *kindInfo, ns, name string, obj *unstructured.Unstructured) []actionView {
	cs, err := u.clientset()
	if err != nil {
		return nil
	}
	var out []actionView
	for _, s := range d.actionSpecs(k, obj) {
		a := actionView{Name: s.name, Label: s.label, Danger: s.danger}
		attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: s.verb, Group: k.GVR.Group, Resource: k.Resource, Name: name}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}, metav1.CreateOptions{})
		switch {
		case err != nil:
			a.Why = "the server could not say whether you may: " + err.Error()
		case r.Status.Allowed:
			a.Allowed = true
		default:
			a.Why = whyNot(u.name, attrs, r.Status)
		}
		out = append(out, a)
	}
	return out
}

// whyNot answers "why can't I": what was asked, of whom, and what the authorizers said.
func whyNot(userName string, a *authorizationv1.ResourceAttributes, st authorizationv1.SubjectAccessReviewStatus) string {
	where := "at the cluster scope"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	msg := fmt.Sprintf("You (%s) may not %s %s.%s %q %s: no RBAC role bound to you grants it, and no AccessPolicy does.",
		userName, a.Verb, a.Resource, a.Group, a.Name, where)
	if st.Denied {
		msg = fmt.Sprintf("You (%s) may not %s %s.%s %q %s: an authorizer denies it explicitly.", userName, a.Verb, a.Resource, a.Group, a.Name, where)
	}
	if st.Reason != "" {
		msg += " The server says: " + st.Reason
	}
	if st.EvaluationError != "" {
		msg += " (evaluation error: " + st.EvaluationError + ")"
	}
	return msg + " Ask an administrator for a role with " + a.Verb + " on " + a.Resource + "." + a.Group + "."
}

// action performs a write as the user (the API's authorization decides), after the
// cross-site and CSRF checks; it answers 303 to the object's page.
func (d *Dashboard) action(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r.Context())
	if !d.checkWrite(w, r, u) {
		return
	}
	ctx := r.Context()
	act, resource, ns, name := r.PostFormValue("action"), r.PostFormValue("resource"), r.PostFormValue("namespace"), r.PostFormValue("name")
	if name == "" || resource == "" {
		d.fail(w, r, u, http.StatusBadRequest, "Bad request", "resource and name are required")
		return
	}
	k, _, err := d.kindOf(ctx, u, resource, ns)
	if err != nil {
		d.kindError(w, r, u, err)
		return
	}
	dc, err := u.dynamic()
	if err != nil {
		d.apiError(w, r, u, err)
		return
	}
	ri := dc.Resource(k.GVR)
	var res interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error)
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error)
	} = ri
	if k.Namespaced {
		res = ri.Namespace(ns)
	}
	patch := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = res.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "kube-dashboard"})
		return err
	}
	switch act {
	case "delete":
		err = res.Delete(ctx, name, metav1.DeleteOptions{})
	case "reconcile":
		err = patch(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ReconcileAnnotation: d.o.Now().UTC().Format(time.RFC3339Nano)}}})
	case "suspend", "resume":
		if !d.o.Suspendable(k.GVR.Group, k.Resource) {
			d.fail(w, r, u, http.StatusBadRequest, "Bad request", k.Kind+" has no spec.suspend")
			return
		}
		err = patch(map[string]any{"spec": map[string]any{"suspend": act == "suspend"}})
	default:
		d.fail(w, r, u, http.StatusBadRequest, "Bad request", fmt.Sprintf("unknown action %q", act))
		return
	}
	if err != nil {
		d.apiError(w, r, u, err)
		return
	}
	to := objectURL(k.Resource, ns, name)
	if act == "delete" {
		// The object may be gone already (else its page says why it stays): back to the list.
		if _, err := res.Get(ctx, name, metav1.GetOptions{}); err != nil {
			to = kindURL(k.Resource, ns)
		}
	}
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	http.Redirect(w, r, to+sep+"done="+url.QueryEscape(act), http.StatusSeeOther)
}
