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
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// webhookConverter calls the CRD's conversion webhook with a ConversionReview in the first
// of its conversionReviewVersions that Kube speaks (v1, v1beta1).
type webhookConverter struct {
	crd  *apiextensionsv1.CustomResourceDefinition
	opts Options

	once   sync.Once
	client *http.Client
	url    string // a clientConfig.url
	// service, when the webhook is a Service, is resolved on every call; serverName is the
	// name its certificate must carry.
	service    *apiextensionsv1.ServiceReference
	serverName string
	review     string // ConversionReview version
	err        error
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
	if w.review, w.err = reviewVersion(wh.ConversionReviewVersions); w.err != nil {
		return
	}
	cc := wh.ClientConfig
	switch {
	case cc.URL != nil:
		w.url = *cc.URL
		if _, err := url.Parse(w.url); err != nil {
			w.err = fmt.Errorf("conversion webhook url: %w", err)
			return
		}
	case cc.Service != nil:
		if w.opts.ResolveService == nil {
			w.err = fmt.Errorf("the conversion webhook is the service %s/%s, which this server cannot resolve: set spec.conversion.webhook.clientConfig.url instead", cc.Service.Namespace, cc.Service.Name)
			return
		}
		// resolved on every call (endpoint), verified as <service>.<namespace>.svc
		w.service = cc.Service
		w.serverName = cc.Service.Name + "." + cc.Service.Namespace + ".svc"
	default:
		w.err = errors.New("spec.conversion.webhook.clientConfig has neither url nor service")
		return
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: w.serverName}
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
	sent := make([]runtime.RawExtension, len(idx))
	for n, i := range idx {
		raw, err := json.Marshal(objs[i].Object)
		if err != nil {
			return nil, err
		}
		sent[n] = runtime.RawExtension{Raw: raw}
	}
	converted, err := w.call(ctx, apiVersion, sent)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %s failed: %w", w.crd.Name, err)
	}
	out := append([]*unstructured.Unstructured(nil), objs...)
	for n, i := range idx {
		in, c := objs[i], converted[n]
		if err := checkConverted(in, c, apiVersion); err != nil {
			return nil, fmt.Errorf("conversion webhook for %s returned an invalid object for %s: %w", w.crd.Name, objectName(in), err)
		}
		if err := restoreMetadata(in, c); err != nil {
			return nil, fmt.Errorf("conversion webhook for %s returned invalid metadata for %s: %w", w.crd.Name, objectName(in), err)
		}
		out[i] = c
	}
	return out, nil
}

// location is the URL to post to: clientConfig.url, or a ready endpoint of the Service.
func (w *webhookConverter) location() (string, error) {
	if w.service == nil {
		return w.url, nil
	}
	ref := w.service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	u, err := w.opts.ResolveService(ref.Namespace, ref.Name, port)
	if err != nil {
		return "", fmt.Errorf("resolving the service %s/%s:%s: %v", ref.Namespace, ref.Name, strconv.Itoa(int(port)), err)
	}
	if ref.Path != nil {
		u = u.JoinPath(*ref.Path)
	}
	return u.String(), nil
}

// call posts a ConversionReview of objects and returns the converted objects, one per object
// sent.
func (w *webhookConverter) call(ctx context.Context, apiVersion string, objects []runtime.RawExtension) ([]*unstructured.Unstructured, error) {
	uid := types.UID(uuid.NewString())
	body, err := encodeReview(w.review, uid, apiVersion, objects)
	if err != nil {
		return nil, err
	}
	u, err := w.location()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
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
	converted, err := decodeReview(w.review, uid, data)
	if err != nil {
		return nil, err
	}
	if len(converted) != len(objects) {
		return nil, fmt.Errorf("the webhook returned %d objects for %d", len(converted), len(objects))
	}
	out := make([]*unstructured.Unstructured, len(converted))
	for i, raw := range converted {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("converted object %d: %v", i, err)
		}
		out[i] = u
	}
	return out, nil
}

func objectName(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}

// checkConverted refuses what kube-apiserver refuses from a webhook: another version or
// kind, a changed name, namespace or uid.
func checkConverted(in, out *unstructured.Unstructured, apiVersion string) error {
	switch {
	case out.GetAPIVersion() != apiVersion:
		return fmt.Errorf("apiVersion %q, want %q", out.GetAPIVersion(), apiVersion)
	case out.GetKind() != in.GetKind():
		return fmt.Errorf("kind %q, want %q", out.GetKind(), in.GetKind())
	case out.GetName() != in.GetName():
		return fmt.Errorf("metadata.name %q, want %q", out.GetName(), in.GetName())
	case out.GetNamespace() != in.GetNamespace():
		return fmt.Errorf("metadata.namespace %q, want %q", out.GetNamespace(), in.GetNamespace())
	case out.GetUID() != in.GetUID():
		return fmt.Errorf("metadata.uid %q, want %q", out.GetUID(), in.GetUID())
	}
	return nil
}

// restoreMetadata gives converted the metadata of original, but for the labels and
// annotations converted carries: a webhook may change those (kube-apiserver lets it), and
// nothing else of metadata. Labels and annotations the webhook changed must be valid; an
// absent or null map removes them.
func restoreMetadata(original, converted *unstructured.Unstructured) error {
	m, ok := converted.Object["metadata"]
	if !ok {
		return errors.New("metadata is missing")
	}
	answered, ok := m.(map[string]any)
	if !ok {
		return fmt.Errorf("metadata is a %T, not an object", m)
	}
	md, _ := runtime.DeepCopyJSONValue(original.Object["metadata"]).(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	for _, f := range []string{"labels", "annotations"} {
		v := answered[f]
		if v == nil {
			delete(md, f)
			continue
		}
		got, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("metadata.%s is a %T, not an object", f, v)
		}
		was, _ := md[f].(map[string]any)
		changed := len(got) != len(was)
		strs := make(map[string]string, len(got))
		for k, v := range got {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("metadata.%s[%s] is a %T, not a string", f, k, v)
			}
			strs[k] = s
			if w, ok := was[k].(string); !ok || w != s {
				changed = true
			}
		}
		if changed {
			var errs field.ErrorList
			if f == "labels" {
				errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", f))
			} else {
				errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", f))
			}
			if len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		md[f] = got
	}
	converted.Object["metadata"] = md
	return nil
}
