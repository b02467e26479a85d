// Package admission defines what the REST handler asks of admission: every create, update
// and delete passes Admit (mutating plugins and webhooks, which may change the object) before
// the kind's own validation, and Validate (validating plugins and webhooks, which may only
// refuse) after it, as in kube-apiserver. An error refuses the request; return an
// *apierrors.StatusError to choose the code the client sees (403 Forbidden by default).
//
// Requests to connect subresources (pods/exec, pods/attach, pods/portforward, the proxy
// subresources) pass Admit and Validate too, with Operation Connect and the subresource's
// options (v1 PodExecOptions, ...) as the object, before they are forwarded; as upstream,
// only webhooks and admission policies look at them (none of the built-in plugins handles
// CONNECT), and what a mutating webhook or policy changes in the options is what is
// forwarded.
package admission
