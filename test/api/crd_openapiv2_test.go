package api

import (
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A CRD whose schema preserves unknown fields at its root is a plain object in
// /openapi/v2, as kube-apiserver publishes it ("works for CRD preserving unknown fields at
// the schema root" of the conformance suite); kubectl then sends any field.
func TestOpenAPIV2RootPreserveUnknownFields(t *testing.T) {
	crdSuite.Need(t)
	ext, _, cfg := clients(t)
	ctx := ctxT(t, 60*time.Second)
	crd := crdFromJSON(t, `{"metadata":{"name":"blobs.openv2.example.com"},"spec":{"group":"openv2.example.com","scope":"Namespaced",
		"names":{"plural":"blobs","kind":"Blob"},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ext, "blobs.openv2.example.com", apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	cs := kubernetes.NewForConfigOrDie(cfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Definitions map[string]map[string]any `json:"definitions"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if d, ok := doc.Definitions["com.example.openv2.v1.Blob"]; ok {
			if d["type"] != "object" || d["properties"] != nil || d["x-kubernetes-preserve-unknown-fields"] != nil || d["x-kubernetes-group-version-kind"] == nil || len(d) != 2 {
				t.Fatalf("definition %v, want a plain object with its group-version-kind", d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the CRD's definition never appeared in /openapi/v2")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
