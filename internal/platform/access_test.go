package platform

import (
	"testing"

	"kubeos.dev/kube/internal/apiserver/request"
)

func TestViaMatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		via  []string
		info request.Info
		want bool
	}{
		{"product token", []string{"kube-deploy"}, request.Info{UserAgent: "kube-deploy/1.2 (linux/amd64)"}, true},
		{"token without version", []string{"kube-deploy"}, request.Info{UserAgent: "kube-deploy"}, true},
		{"token with comment only", []string{"kube-deploy"}, request.Info{UserAgent: "kube-deploy (ci)"}, true},
		{"other agent", []string{"kube-deploy"}, request.Info{UserAgent: "curl/8.5.0"}, false},
		{"prefix is not the token", []string{"kube"}, request.Info{UserAgent: "kube-deploy/1.2"}, false},
		{"no agent", []string{"kube-deploy"}, request.Info{}, false},
		{"impersonator", []string{"deployer"}, request.Info{UserAgent: "curl/8.5.0", Impersonator: "deployer"}, true},
		{"other impersonator", []string{"deployer"}, request.Info{Impersonator: "mallory"}, false},
		{"empty entry matches nothing", []string{""}, request.Info{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := viaMatches(tc.via, &tc.info); got != tc.want {
				t.Fatalf("viaMatches(%q, agent %q, impersonator %q) = %v, want %v", tc.via, tc.info.UserAgent, tc.info.Impersonator, got, tc.want)
			}
		})
	}
}
