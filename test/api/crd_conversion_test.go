package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"kubeos.dev/kube/internal/storage"
)

// conversionWebhook converts Hosts of any group between v1alpha1 (spec.host, spec.port)
// and v1 (spec.address "host:port"), answering in the ConversionReview version asked.
// mode: "ok"; "garbage" (answers something that is not a ConversionReview); "meddle"
// (adds spec.bogus, which no schema has, sets metadata.generation to 99 and adds the
// annotation converted-by); "bad-label" (adds an invalid label).
type conversionWebhook struct {
	mode  atomic.Value
	calls atomic.Int64
	// only, when set, is the one ConversionReview apiVersion served; others get a 400.
	only string
	// reviews counts the reviews received by apiVersion.
	reviews sync.Map // string → *atomic.Int64
}

func (w *conversionWebhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.calls.Add(1)
	if w.mode.Load() == "garbage" {
		rw.Write([]byte("<html>not a review</html>"))
		return
	}
	// v1 and v1beta1 reviews have the same fields: one Go type decodes both, and the
	// answer keeps the apiVersion of the request.
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	n, _ := w.reviews.LoadOrStore(review.APIVersion, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if w.only != "" && review.APIVersion != w.only {
		http.Error(rw, "this webhook serves only "+w.only, http.StatusBadRequest)
		return
	}
	mode := w.mode.Load()
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		next := map[string]any{}
		switch _, version, _ := strings.Cut(review.Request.DesiredAPIVersion, "/"); version {
		case "v1":
			next["address"] = fmt.Sprintf("%v:%v", spec["host"], spec["port"])
		case "v1alpha1":
			host, port, _ := strings.Cut(fmt.Sprint(spec["address"]), ":")
			var p int64
			fmt.Sscan(port, &p)
			next["host"], next["port"] = host, p
		}
		switch mode {
		case "meddle":
			next["bogus"] = "from the webhook"
			u.SetGeneration(99)
			u.SetAnnotations(map[string]string{"converted-by": "webhook"})
		case "bad-label":
			u.SetLabels(map[string]string{"bad key!": "x"})
		}
		u.Object["spec"] = next
		u.SetAPIVersion(review.Request.DesiredAPIVersion)
		data, _ := u.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
	}
	review.Response, review.Request = resp, nil
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(&review)
}

// selfSignedTLS makes a CA and a serving certificate for 127.0.0.1.
func selfSignedTLS(t *testing.T) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// reviewCount is how many ConversionReviews of apiVersion the webhook received.
func (w *conversionWebhook) reviewCount(apiVersion string) int64 {
	if n, ok := w.reviews.Load(apiVersion); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// startWebhook serves hook over HTTPS until the test ends; it returns the conversion URL
// and the CA bundle that trusts it.
func startWebhook(t *testing.T, hook *conversionWebhook) (*httptest.Server, string, []byte) {
	t.Helper()
	if hook.mode.Load() == nil {
		hook.mode.Store("ok")
	}
	caPEM, cert := selfSignedTLS(t)
	ts := httptest.NewUnstartedServer(hook)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, ts.URL + "/convert", caPEM
}

// createHostsCRD creates hosts.<group> (hostsCRD) and waits until it is established. It
// returns clients of the v1alpha1 and v1 Hosts in namespace default.
func createHostsCRD(t *testing.T, ctx context.Context, group string, reviewVersions []string, url string, caPEM []byte) (v1alpha1, v1 dynamic.ResourceInterface) {
	t.Helper()
	ext, dyn, _ := clients(t)
	rv, _ := json.Marshal(reviewVersions)
	// caBundle is []byte in Go: base64 in JSON.
	crd := crdFromJSON(t, fmt.Sprintf(hostsCRD, group, group, rv, url, b64(caPEM)))
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "hosts."+group, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	v1alpha1 = dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "hosts"}).Namespace("default")
	v1 = dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "hosts"}).Namespace("default")
	return v1alpha1, v1
}

// hostsCRD: group twice, conversionReviewVersions (JSON), webhook URL, caBundle (base64).
const hostsCRD = `{"metadata":{"name":"hosts.%s"},"spec":{"group":%q,"scope":"Namespaced",
	"names":{"plural":"hosts","kind":"Host"},
	"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":%s,"clientConfig":{"url":%q,"caBundle":%q}}},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"integer"}}}}}}},
	 {"name":"v1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"address":{"type":"string"}}}}}}}]}}`

// TestWebhookConversion: objects round-trip between versions through a conversion webhook
// (ConversionReview v1 over TLS, caBundle); switching the storage version migrates every
// object and trims storedVersions; a webhook that is down or answers garbage fails the
// request with a clear Status and the server keeps serving.
func TestWebhookConversion(t *testing.T) {
	crdSuite.Need(t)
	ext, _, _ := clients(t)
	ctx := ctxT(t, 90*time.Second)
	hook := &conversionWebhook{}
	ts, url, caPEM := startWebhook(t, hook)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	v1alpha1, v1 := createHostsCRD(t, ctx, "conv.example.com", []string{"v1"}, url, caPEM)

	a := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conv.example.com/v1alpha1", "kind": "Host",
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"tier": "db"}}, "spec": map[string]any{"host": "db1", "port": int64(5432)}}}
	if _, err := v1alpha1.Create(ctx, a, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := v1.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if addr, _, _ := unstructured.NestedString(got.Object, "spec", "address"); addr != "db1:5432" || got.GetAPIVersion() != "conv.example.com/v1" || got.GetLabels()["tier"] != "db" {
		t.Errorf("a in v1: %v", got.Object)
	}
	b := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conv.example.com/v1", "kind": "Host",
		"metadata": map[string]any{"name": "b"}, "spec": map[string]any{"address": "db2:3306"}}}
	if _, err := v1.Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = v1alpha1.Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := unstructured.NestedString(got.Object, "spec", "host"); host != "db2" {
		t.Errorf("b in v1alpha1: %v", got.Object)
	}
	list, err := v1.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list in v1: %v, %v", list, err)
	}
	if n := hook.reviewCount("apiextensions.k8s.io/v1"); n == 0 {
		t.Errorf("the webhook received no ConversionReview v1")
	}
	if stored := storedAPIVersion(t, "b"); stored != "conv.example.com/v1alpha1" {
		t.Errorf("b stored as %s, want the storage version v1alpha1", stored)
	}

	// Storage version → v1: storedVersions gets v1, the migration rewrites every object,
	// then storedVersions holds only v1.
	cur, err := crds.Get(ctx, "hosts.conv.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions[0].Storage, cur.Spec.Versions[1].Storage = false, true
	if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := crds.Get(ctx, "hosts.conv.example.com", metav1.GetOptions{})
		return err == nil && len(c.Status.StoredVersions) == 1 && c.Status.StoredVersions[0] == "v1", nil
	}); err != nil {
		c, _ := crds.Get(ctx, "hosts.conv.example.com", metav1.GetOptions{})
		t.Fatalf("storedVersions not trimmed to [v1]: %v\nserver log:\n%s", c.Status.StoredVersions, serverLog.String())
	}
	for _, name := range []string{"a", "b"} {
		if stored := storedAPIVersion(t, name); stored != "conv.example.com/v1" {
			t.Errorf("%s stored as %s after the migration, want v1", name, stored)
		}
	}

	// A webhook answering garbage, then one that is down: the request fails with a clear
	// Status; the server keeps serving other requests.
	hook.mode.Store("garbage")
	_, err = v1alpha1.Get(ctx, "a", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhook for hosts.conv.example.com") || !strings.Contains(err.Error(), "not a ConversionReview") {
		t.Errorf("garbage answer: err = %v", err)
	}
	ts.Close()
	_, err = v1alpha1.Get(ctx, "a", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhook for hosts.conv.example.com failed") {
		t.Errorf("webhook down: err = %v", err)
	}
	if _, err := v1.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("a read in the storage version needs no webhook: %v", err)
	}
	if _, err := crds.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("server not serving after webhook failures: %v", err)
	}
}

// storedAPIVersion reads the apiVersion of a Host as stored in etcd.
func storedAPIVersion(t *testing.T, name string) string {
	t.Helper()
	return storedObject(t, "conv.example.com", "hosts", name).GetAPIVersion()
}

// storedObject reads a custom resource of namespace default as stored in etcd.
func storedObject(t *testing.T, group, resource, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := crdSrv.Inner().Store.Get(context.Background(), storage.Key(group, resource, "default", name))
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func host(apiVersion, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": "Host",
		"metadata": map[string]any{"name": name}, "spec": spec}}
}

// TestWebhookConversionPrunes: what a webhook adds that the schema of the version it
// converts to does not know is pruned, on writes (never stored) and on reads (never
// returned); of metadata, it may change labels and annotations only; an invalid label fails
// the request with a clear Status, and nothing is stored.
func TestWebhookConversionPrunes(t *testing.T) {
	crdSuite.Need(t)
	ctx := ctxT(t, 60*time.Second)
	hook := &conversionWebhook{}
	hook.mode.Store("meddle")
	_, url, caPEM := startWebhook(t, hook)
	const group = "meddle.example.com"
	v1alpha1, v1 := createHostsCRD(t, ctx, group, []string{"v1"}, url, caPEM)

	// Written in v1, stored in v1alpha1, returned in v1: the webhook meddles both ways.
	created, err := v1.Create(ctx, host(group+"/v1", "a", map[string]any{"address": "db1:5432"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := storedObject(t, group, "hosts", "a")
	if _, ok := stored.Object["spec"].(map[string]any)["bogus"]; ok || stored.GetAPIVersion() != group+"/v1alpha1" {
		t.Errorf("stored: %v; want v1alpha1 without spec.bogus", stored.Object)
	}
	if stored.GetGeneration() != 1 || stored.GetAnnotations()["converted-by"] != "webhook" {
		t.Errorf("stored metadata: %v; want generation 1 (restored) and the webhook's annotation", stored.Object["metadata"])
	}
	got, err := v1.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := v1.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list in v1: %v, %v", list, err)
	}
	for what, o := range map[string]*unstructured.Unstructured{"create response": created, "get": got, "list": &list.Items[0]} {
		spec, _, _ := unstructured.NestedMap(o.Object, "spec")
		if _, ok := spec["bogus"]; ok || spec["address"] != "db1:5432" || o.GetGeneration() != 1 || o.GetAnnotations()["converted-by"] != "webhook" {
			t.Errorf("%s in v1: %v; want spec.address only, generation 1, the webhook's annotation", what, o.Object)
		}
	}

	// An invalid label from the webhook fails reads and writes that convert.
	hook.mode.Store("bad-label")
	_, err = v1.Get(ctx, "a", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhook for hosts."+group+" returned invalid metadata for default/a") ||
		!strings.Contains(err.Error(), `metadata.labels: Invalid value: "bad key!"`) {
		t.Errorf("invalid label: err = %v", err)
	}
	_, err = v1.Create(ctx, host(group+"/v1", "b", map[string]any{"address": "db2:5432"}), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "metadata.labels") {
		t.Errorf("create with an invalid label from the webhook: err = %v", err)
	}
	if _, err := v1alpha1.Get(ctx, "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("b stored after a failed conversion: %v", err)
	}
	if _, err := v1alpha1.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("a read in the storage version needs no webhook: %v", err)
	}
}

// TestWebhookConversionV1beta1: a CRD whose conversionReviewVersions is [v1beta1] gets
// ConversionReviews v1beta1, from a webhook that refuses v1, both ways.
func TestWebhookConversionV1beta1(t *testing.T) {
	crdSuite.Need(t)
	ctx := ctxT(t, 60*time.Second)
	hook := &conversionWebhook{only: "apiextensions.k8s.io/v1beta1"}
	_, url, caPEM := startWebhook(t, hook)
	const group = "beta.conv.example.com"
	v1alpha1, v1 := createHostsCRD(t, ctx, group, []string{"v1beta1"}, url, caPEM)

	if _, err := v1.Create(ctx, host(group+"/v1", "a", map[string]any{"address": "db1:5432"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := v1alpha1.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(got.Object, "spec", "host"); h != "db1" {
		t.Errorf("a in v1alpha1: %v", got.Object)
	}
	got, err = v1.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if addr, _, _ := unstructured.NestedString(got.Object, "spec", "address"); addr != "db1:5432" {
		t.Errorf("a in v1: %v", got.Object)
	}
	if beta, v1n := hook.reviewCount("apiextensions.k8s.io/v1beta1"), hook.reviewCount("apiextensions.k8s.io/v1"); beta == 0 || v1n != 0 {
		t.Errorf("reviews received: %d v1beta1, %d v1; want only v1beta1", beta, v1n)
	}
}

// gadgetsCRD (group twice, whether v1alpha1 is the storage version, whether v1 is) has
// strategy None and two versions whose schemas differ: only v1 has spec.replicas.
const gadgetsCRD = `{"metadata":{"name":"gadgets.%s"},"spec":{"group":%q,"scope":"Namespaced",
	"names":{"plural":"gadgets","kind":"Gadget"},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":%t,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
	   "properties":{"size":{"type":"integer"}}}}}}},
	 {"name":"v1","served":true,"storage":%t,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
	   "properties":{"size":{"type":"integer"},"replicas":{"type":"integer"}}}}}}}]}}`

// TestConversionNonePrunes: with strategy None, an object is pruned with the schema of the
// version it is converted to: a field only v1 has is not stored when v1alpha1 is the
// storage version, and not returned by reads (get, list, watch) in v1alpha1 when v1 is.
func TestConversionNonePrunes(t *testing.T) {
	crdSuite.Need(t)
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 60*time.Second)
	gadgets := func(t *testing.T, group string, storageV1 bool) (v1alpha1, v1 dynamic.ResourceInterface) {
		crd := crdFromJSON(t, fmt.Sprintf(gadgetsCRD, group, group, !storageV1, storageV1))
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, ext, "gadgets."+group, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
		gvr := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gadgets"}
		v1alpha1 = dyn.Resource(gvr).Namespace("default")
		gvr.Version = "v1"
		return v1alpha1, dyn.Resource(gvr).Namespace("default")
	}
	gadget := func(group, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": int64(1), "replicas": int64(3)}}}
	}
	hasReplicas := func(o *unstructured.Unstructured) bool {
		_, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
		return ok
	}

	t.Run("written in v1, stored in v1alpha1", func(t *testing.T) {
		const group = "prune-write.example.com"
		_, v1 := gadgets(t, group, false)
		created, err := v1.Create(ctx, gadget(group, "g"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if stored := storedObject(t, group, "gadgets", "g"); hasReplicas(stored) || stored.GetAPIVersion() != group+"/v1alpha1" {
			t.Errorf("stored: %v; want v1alpha1 without spec.replicas", stored.Object)
		}
		got, err := v1.Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for what, o := range map[string]*unstructured.Unstructured{"create response": created, "get in v1": got} {
			if size, _, _ := unstructured.NestedInt64(o.Object, "spec", "size"); hasReplicas(o) || size != 1 {
				t.Errorf("%s: %v; want spec.size only (replicas was not stored)", what, o.Object)
			}
		}
	})

	t.Run("stored in v1, read in v1alpha1", func(t *testing.T) {
		const group = "prune-read.example.com"
		v1alpha1, v1 := gadgets(t, group, true)
		w, err := v1alpha1.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := v1.Create(ctx, gadget(group, "g"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if stored := storedObject(t, group, "gadgets", "g"); !hasReplicas(stored) {
			t.Errorf("stored: %v; want spec.replicas (v1 is the storage version)", stored.Object)
		}
		got, err := v1alpha1.Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := v1alpha1.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("list in v1alpha1: %v, %v", list, err)
		}
		var watched *unstructured.Unstructured
		select {
		case ev := <-w.ResultChan():
			watched, _ = ev.Object.(*unstructured.Unstructured)
		case <-ctx.Done():
			t.Fatal("no watch event for the created gadget")
		}
		for what, o := range map[string]*unstructured.Unstructured{"get": got, "list": &list.Items[0], "watch": watched} {
			if o == nil || hasReplicas(o) || o.GetAPIVersion() != group+"/v1alpha1" {
				t.Errorf("%s in v1alpha1: %v; want no spec.replicas", what, o)
			}
		}
		if got, err := v1.Get(ctx, "g", metav1.GetOptions{}); err != nil || !hasReplicas(got) {
			t.Errorf("get in v1: %v, %v; want spec.replicas", got, err)
		}
	})
}
