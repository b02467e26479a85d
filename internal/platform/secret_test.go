package platform

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestSecretRefs(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"custom resource secretRef", `{"secretRef": {"name": "db"}}`, []string{"db"}},
		{"secretName", `{"secretName": "tls", "duration": "1h"}`, []string{"tls"}},
		{"named SecretRef", `{"tls": {"caSecretRef": {"name": "ca"}}}`, []string{"ca"}},
		{"pod", `{
			"volumes": [{"secret": {"secretName": "vol"}}, {"projected": {"sources": [{"secret": {"name": "proj"}}]}}],
			"imagePullSecrets": [{"name": "pull"}],
			"containers": [{"env": [{"valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}], "envFrom": [{"secretRef": {"name": "from"}}]}]
		}`, []string{"env", "from", "proj", "pull", "vol"}},
		{"duplicates once", `{"a": {"secretName": "x"}, "b": {"secretName": "x"}}`, []string{"x"}},
		{"no references", `{"secretNames": ["app-*"], "name": "x", "secret": "plain string"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec any
			if err := json.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			if got := secretRefs(spec); !slices.Equal(got, tc.want) {
				t.Fatalf("secretRefs(%s) = %q, want %q", tc.spec, got, tc.want)
			}
		})
	}
}
