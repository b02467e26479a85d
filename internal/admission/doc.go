// Package admission defines what the REST handler asks of admission: every create, update
// and delete passes Admit (mutating plugins and webhooks, which may change the object) before
// the kind's own validation, and Validate (validating plugins and webhooks, which may only
// refuse) after it, as in kube-apiserver. An error refuses the request; return an
// *apierrors.StatusError to choose the code the client sees (403 Forbidden by default).
package admission
