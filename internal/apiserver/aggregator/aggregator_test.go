package aggregator

import (
	"net/http"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRemotePath(t *testing.T) {
	for _, c := range []struct {
		path string
		gv   schema.GroupVersion
		ok   bool
	}{
		{"/apis/wardle.example.com/v1alpha1", schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}, true},
		{"/apis/wardle.example.com/v1alpha1/namespaces/x/flunders/y", schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}, true},
		{"/apis/wardle.example.com", schema.GroupVersion{}, false},
		{"/apis/wardle.example.com/", schema.GroupVersion{}, false},
		{"/apis", schema.GroupVersion{}, false},
		{"/api/v1/pods", schema.GroupVersion{}, false},
		{"/apis//v1", schema.GroupVersion{}, false},
	} {
		gv, ok := remotePath(c.path)
		if gv != c.gv || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.path, gv, ok, c.gv, c.ok)
		}
	}
}

func TestSetIdentity(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Bearer secret")
	h.Set("Impersonate-User", "root")
	h.Add("Impersonate-Group", "system:masters")
	h.Set("X-Remote-User", "forged")
	h.Set("X-Remote-Extra-Scopes", "forged")
	h.Set("Accept", "application/json")
	setIdentity(h, "alice", "u-1", []string{"dev", "system:authenticated"}, map[string][]string{"scopes": {"a", "b"}, "a/b": {"c"}})
	want := http.Header{
		"Accept":                {"application/json"},
		"X-Remote-User":         {"alice"},
		"X-Remote-Uid":          {"u-1"},
		"X-Remote-Group":        {"dev", "system:authenticated"},
		"X-Remote-Extra-Scopes": {"a", "b"},
		"X-Remote-Extra-A%2fb":  {"c"}, // canonicalised; %2f unescapes to "/" as %2F does
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers\n got %v\nwant %v", h, want)
	}
}
