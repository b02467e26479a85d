package crd

import (
	"encoding/json"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The ConversionReview versions Kube speaks, as kube-apiserver.
const (
	reviewV1      = "v1"
	reviewV1beta1 = "v1beta1"
)

// reviewVersion is the ConversionReview version to send a webhook: the first of the CRD's
// conversionReviewVersions that Kube speaks, as kube-apiserver chooses.
func reviewVersion(versions []string) (string, error) {
	for _, v := range versions {
		if v == reviewV1 || v == reviewV1beta1 {
			return v, nil
		}
	}
	return "", fmt.Errorf("spec.conversion.webhook.conversionReviewVersions %q has no version Kube supports (v1, v1beta1)", versions)
}

// encodeReview is the body of a ConversionReview request in version (one reviewVersion
// returned).
func encodeReview(version string, uid types.UID, desiredAPIVersion string, objects []runtime.RawExtension) ([]byte, error) {
	switch version {
	case reviewV1:
		return json.Marshal(&apiextensionsv1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: objects},
		})
	case reviewV1beta1:
		return json.Marshal(&apiextensionsv1beta1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1beta1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1beta1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: objects},
		})
	}
	return nil, fmt.Errorf("ConversionReview version %q is not supported", version)
}

// decodeReview checks a webhook's answer to the review uid sent in version and returns the
// converted objects. A v1 answer must be an apiextensions.k8s.io/v1 ConversionReview with
// the request's uid; a v1beta1 answer is checked for neither, as kube-apiserver does for
// webhooks written before v1.
func decodeReview(version string, uid types.UID, data []byte) ([]runtime.RawExtension, error) {
	var (
		result    metav1.Status
		converted []runtime.RawExtension
	)
	switch version {
	case reviewV1:
		var answer apiextensionsv1.ConversionReview
		if err := json.Unmarshal(data, &answer); err != nil {
			return nil, fmt.Errorf("the webhook answered something that is not a ConversionReview: %v", err)
		}
		if want := apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview"); answer.GroupVersionKind() != want {
			return nil, fmt.Errorf("the webhook answered apiVersion %q kind %q, want an %s ConversionReview", answer.APIVersion, answer.Kind, want.GroupVersion())
		}
		r := answer.Response
		if r == nil {
			return nil, errors.New("the webhook's ConversionReview has no response")
		}
		if r.UID != uid {
			return nil, fmt.Errorf("the webhook's response uid %q does not match the request's %q", r.UID, uid)
		}
		result, converted = r.Result, r.ConvertedObjects
	case reviewV1beta1:
		var answer apiextensionsv1beta1.ConversionReview
		if err := json.Unmarshal(data, &answer); err != nil {
			return nil, fmt.Errorf("the webhook answered something that is not a ConversionReview: %v", err)
		}
		r := answer.Response
		if r == nil {
			return nil, errors.New("the webhook's ConversionReview has no response")
		}
		result, converted = r.Result, r.ConvertedObjects
	default:
		return nil, fmt.Errorf("ConversionReview version %q is not supported", version)
	}
	if result.Status != metav1.StatusSuccess {
		msg := result.Message
		if msg == "" {
			msg = fmt.Sprintf("result.status %q, not %q", result.Status, metav1.StatusSuccess)
		}
		return nil, fmt.Errorf("the webhook refused the conversion: %s", msg)
	}
	return converted, nil
}
