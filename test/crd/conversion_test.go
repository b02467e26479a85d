package crd

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

	"kubeos.dev/kube/internal/storage"
)

// conversionWebhook converts Hosts between v1alpha1 (spec.host, spec.port) and v1
// (spec.address "host:port"). mode: "ok", "garbage" (answers something that is not a
// ConversionReview).
type conversionWebhook struct {
	mode  atomic.Value
	calls atomic.Int64
}

func (w *conversionWebhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.calls.Add(1)
	if w.mode.Load() == "garbage" {
		rw.Write([]byte("<html>not a review</html>"))
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		next := map[string]any{}
		switch review.Request.DesiredAPIVersion {
		case "conv.example.com/v1":
			next["address"] = fmt.Sprintf("%v:%v", spec["host"], spec["port"])
		case "conv.example.com/v1alpha1":
			host, port, _ := strings.Cut(fmt.Sprint(spec["address"]), ":")
			var p int64
			fmt.Sscan(port, &p)
			next["host"], next["port"] = host, p
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

const hostsCRD = `{"metadata":{"name":"hosts.conv.example.com"},"spec":{"group":"conv.example.com","scope":"Namespaced",
	"names":{"plural":"hosts","kind":"Host"},
	"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"url":%q,"caBundle":%q}}},
	"versions":[
	 {"name":"v1alpha1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"integer"}}}}}}},
	 {"name":"v1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"address":{"type":"string"}}}}}}}]}}`

// TestWebhookConversion: objects round-trip between versions through a conversion webhook
// (ConversionReview v1 over TLS, caBundle); switching the storage version migrates every
// object and trims storedVersions; a webhook that is down or answers garbage fails the
// request with a clear Status and the server keeps serving.
func TestWebhookConversion(t *testing.T) {
	ext, dyn, _ := clients(t)
	ctx := ctxT(t, 90*time.Second)
	hook := &conversionWebhook{}
	hook.mode.Store("ok")
	caPEM, cert := selfSignedTLS(t)
	ts := httptest.NewUnstartedServer(hook)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	defer ts.Close()

	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	// caBundle is []byte in Go: base64 in JSON.
	crd := crdFromJSON(t, fmt.Sprintf(hostsCRD, ts.URL+"/convert", b64(caPEM)))
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "hosts.conv.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	v1alpha1 := dyn.Resource(schema.GroupVersionResource{Group: "conv.example.com", Version: "v1alpha1", Resource: "hosts"}).Namespace("default")
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "conv.example.com", Version: "v1", Resource: "hosts"}).Namespace("default")

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
	s := srv.Inner()
	obj, err := s.Store.Get(context.Background(), storage.Key("conv.example.com", "hosts", "default", name))
	if err != nil {
		t.Fatal(err)
	}
	return obj.GetAPIVersion()
}
