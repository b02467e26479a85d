package rest

import (
	"context"
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/internal/storage"
)

// statusError turns any error into the API error a client sees. gr and name describe the
// object the request addressed.
func statusError(err error, gr schema.GroupResource, name string) *apierrors.StatusError {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	var serr *storage.Error
	errors.As(err, &serr)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrAlreadyExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		msg := "the object has been modified; please apply your changes to the latest version and try again"
		if serr != nil && serr.Detail != "" && !isRVPrecondition(serr.Detail) {
			msg = serr.Detail
		}
		return apierrors.NewConflict(gr, name, errors.New(msg))
	case errors.Is(err, storage.ErrCompacted) && serr != nil && serr.Continue != "":
		se := apierrors.NewResourceExpired(inconsistentContinue)
		se.ErrStatus.ListMeta.Continue = serr.Continue
		return se
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired(err.Error())
	case errors.Is(err, storage.ErrFutureRevision):
		se := apierrors.NewTimeoutError(err.Error(), 1)
		se.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		return se
	case errors.Is(err, storage.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError(err.Error())
	case errors.Is(err, storage.ErrInvalidContinue), errors.Is(err, storage.ErrInvalidRevision):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
	case errors.Is(err, context.Canceled):
		return apierrors.NewTimeoutError("request canceled", 0)
	}
	return apierrors.NewInternalError(err)
}

// inconsistentContinue is kube-apiserver's message for a continue token whose revision was
// compacted; the Status carries a token that goes on at the newest revision.
const inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
	"show up in the list."

func isRVPrecondition(detail string) bool {
	return strings.Contains(detail, "ResourceVersion in precondition")
}

// WriteStatus writes an API error as a metav1.Status with its HTTP code.
func WriteStatus(w http.ResponseWriter, se *apierrors.StatusError) {
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
		st.Code = int32(code)
	}
	// Retry-After only when the status asks for it, as kube-apiserver: a refused eviction (429,
	// no retry period) is for the client to retry on its own schedule (kubectl drain's 5 s),
	// not for client-go to retry inside the request.
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 && code != http.StatusInternalServerError {
		w.Header().Set("Retry-After", itoa(int64(st.Details.RetryAfterSeconds)))
	}
	writeJSON(w, code, &st)
}

func unsupportedMediaType(contentType string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format (" + contentType +
			") - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (built-in kinds)",
	}}
}

// unsupportedPatchType is upstream's 415 for a PATCH whose Content-Type the kind does not
// take, listing the ones it does.
func unsupportedPatchType(accepted []string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", "),
	}}
}

// ResourceNotFound is upstream's 404 for a path that names no served resource (an unknown
// or unserved group, version, resource or subresource), as opposed to a missing object.
func ResourceNotFound() *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource",
		Details: &metav1.StatusDetails{},
	}}
}

func causeNamespaceTerminating(ns string) metav1.StatusCause {
	return metav1.StatusCause{Type: "NamespaceTerminating", Message: "namespace " + ns + " is terminating", Field: "metadata.namespace"}
}
