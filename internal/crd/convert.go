package crd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// converter turns objects of one CRD into another version of it.
type converter interface {
	// convert returns objs in apiVersion: objects already in it are returned as they are
	// (same pointer), converted ones are new objects the caller owns.
	convert(ctx context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error)
}

func newConverter(crd *apiextensionsv1.CustomResourceDefinition, o Options) converter {
	if c := crd.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter {
		return &webhookConverter{crd: crd, opts: o}
	}
	return noneConverter{}
}

// needing returns the indexes of objs not in apiVersion.
func needing(objs []*unstructured.Unstructured, apiVersion string) []int {
	var idx []int
	for i, o := range objs {
		if o.GetAPIVersion() != apiVersion {
			idx = append(idx, i)
		}
	}
	return idx
}

// noneConverter rewrites apiVersion (strategy None: every version has the same schema).
type noneConverter struct{}

func (noneConverter) convert(_ context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error) {
	idx := needing(objs, apiVersion)
	if len(idx) == 0 {
		return objs, nil
	}
	out := append([]*unstructured.Unstructured(nil), objs...)
	for _, i := range idx {
		o := objs[i].DeepCopy()
		o.SetAPIVersion(apiVersion)
		out[i] = o
	}
	return out, nil
}

// webhookConverter calls the CRD's conversion webhook with a ConversionReview v1.
type webhookConverter struct {
	crd  *apiextensionsv1.CustomResourceDefinition
	opts Options

	once   sync.Once
	client *http.Client
	url    string
	err    error
}

// webhookTimeout bounds one conversion call, as kube-apiserver's 30 s default.
const webhookTimeout = 30 * time.Second

// setup builds the HTTP client (trusting caBundle) and the URL, on first use.
func (w *webhookConverter) setup() {
	wh := w.crd.Spec.Conversion.Webhook
	if wh == nil || wh.ClientConfig == nil {
		w.err = errors.New("spec.conversion.webhook.clientConfig is missing")
		return
	}
	cc := wh.ClientConfig
	switch {
	case cc.URL != nil:
		w.url = *cc.URL
	case cc.Service != nil:
		if w.opts.ResolveService == nil {
			w.err = fmt.Errorf("the conversion webhook is the service %s/%s, which Kube cannot reach (it runs no cluster network): set spec.conversion.webhook.clientConfig.url instead", cc.Service.Namespace, cc.Service.Name)
			return
		}
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		u, err := w.opts.ResolveService(cc.Service.Namespace, cc.Service.Name, port)
		if err != nil {
			w.err = fmt.Errorf("resolving the conversion webhook service %s/%s:%s: %w", cc.Service.Namespace, cc.Service.Name, strconv.Itoa(int(port)), err)
			return
		}
		if cc.Service.Path != nil {
			u = u.JoinPath(*cc.Service.Path)
		}
		w.url = u.String()
	default:
		w.err = errors.New("spec.conversion.webhook.clientConfig has neither url nor service")
		return
	}
	if _, err := url.Parse(w.url); err != nil {
		w.err = fmt.Errorf("conversion webhook url: %w", err)
		return
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			w.err = errors.New("spec.conversion.webhook.clientConfig.caBundle holds no PEM certificate")
			return
		}
		tlsConfig.RootCAs = pool
	}
	w.client = &http.Client{Timeout: webhookTimeout, Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16}}
}

func (w *webhookConverter) convert(ctx context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error) {
	idx := needing(objs, apiVersion)
	if len(idx) == 0 {
		return objs, nil
	}
	w.once.Do(w.setup)
	if w.err != nil {
		return nil, fmt.Errorf("conversion webhook for %s: %w", w.crd.Name, w.err)
	}
	review := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: types.UID(uuid.NewString()), DesiredAPIVersion: apiVersion},
	}
	for _, i := range idx {
		raw, err := json.Marshal(objs[i].Object)
		if err != nil {
			return nil, err
		}
		review.Request.Objects = append(review.Request.Objects, runtime.RawExtension{Raw: raw})
	}
	converted, err := w.call(ctx, &review)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %s failed: %w", w.crd.Name, err)
	}
	out := append([]*unstructured.Unstructured(nil), objs...)
	for n, i := range idx {
		c, err := checkConverted(objs[i], converted[n], apiVersion)
		if err != nil {
			return nil, fmt.Errorf("conversion webhook for %s returned an invalid object: %w", w.crd.Name, err)
		}
		out[i] = c
	}
	return out, nil
}

// call posts the review and returns the converted objects, one per object sent.
func (w *webhookConverter) call(ctx context.Context, review *apiextensionsv1.ConversionReview) ([]*unstructured.Unstructured, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the webhook answered HTTP %d", resp.StatusCode)
	}
	var answer apiextensionsv1.ConversionReview
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("the webhook answered something that is not a ConversionReview: %v", err)
	}
	r := answer.Response
	switch {
	case r == nil:
		return nil, errors.New("the webhook's ConversionReview has no response")
	case r.UID != review.Request.UID:
		return nil, fmt.Errorf("the webhook's response uid %q does not match the request's %q", r.UID, review.Request.UID)
	case r.Result.Status != metav1.StatusSuccess:
		msg := r.Result.Message
		if msg == "" {
			msg = "status " + r.Result.Status
		}
		return nil, fmt.Errorf("the webhook refused the conversion: %s", msg)
	case len(r.ConvertedObjects) != len(review.Request.Objects):
		return nil, fmt.Errorf("the webhook returned %d objects for %d", len(r.ConvertedObjects), len(review.Request.Objects))
	}
	out := make([]*unstructured.Unstructured, len(r.ConvertedObjects))
	for i, raw := range r.ConvertedObjects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("converted object %d: %v", i, err)
		}
		out[i] = u
	}
	return out, nil
}

// checkConverted refuses what upstream refuses from a webhook (another kind or version, a
// changed identity) and keeps the original metadata but labels and annotations.
func checkConverted(in, out *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
	if out.GetAPIVersion() != apiVersion {
		return nil, fmt.Errorf("apiVersion %q, want %q", out.GetAPIVersion(), apiVersion)
	}
	if out.GetKind() != in.GetKind() {
		return nil, fmt.Errorf("kind %q, want %q", out.GetKind(), in.GetKind())
	}
	if out.GetName() != in.GetName() || out.GetNamespace() != in.GetNamespace() || out.GetUID() != in.GetUID() {
		return nil, errors.New("metadata.name, namespace or uid changed")
	}
	md, _, _ := unstructured.NestedFieldCopy(in.Object, "metadata")
	m, _ := md.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok, _ := unstructured.NestedFieldCopy(out.Object, "metadata", k); ok {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
	out.Object["metadata"] = m
	return out, nil
}
