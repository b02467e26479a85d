package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceProxyCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Hour))
	noNFT := errors.New("nftables is not available on this node: table kt1: operation not supported")
	was := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: ConditionServiceProxyReady, Status: s, LastTransitionTime: t0}}
	}
	for _, tc := range []struct {
		name       string
		old        []corev1.NodeCondition
		err        error
		status     corev1.ConditionStatus
		reason     string
		transition metav1.Time
		message    string
	}{
		{"first report, programming", nil, nil, corev1.ConditionTrue, ReasonNFTablesProgrammed, now, "table kt1"},
		{"first report, no nftables", nil, noNFT, corev1.ConditionFalse, ReasonNFTablesUnavailable, now, "operation not supported"},
		{"still unavailable keeps its time", was(corev1.ConditionFalse), noNFT, corev1.ConditionFalse, ReasonNFTablesUnavailable, t0, "does not serve Services"},
		{"recovered", was(corev1.ConditionFalse), nil, corev1.ConditionTrue, ReasonNFTablesProgrammed, now, "programs Services"},
		{"lost", was(corev1.ConditionTrue), noNFT, corev1.ConditionFalse, ReasonNFTablesUnavailable, now, "no userspace fallback"},
		{"still programming keeps its time", was(corev1.ConditionTrue), nil, corev1.ConditionTrue, ReasonNFTablesProgrammed, t0, "kt1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serviceProxyCondition(tc.old, "kt1", tc.err, now)
			if c.Type != ConditionServiceProxyReady || c.Status != tc.status || c.Reason != tc.reason ||
				!c.LastTransitionTime.Equal(&tc.transition) || !c.LastHeartbeatTime.Equal(&now) || !strings.Contains(c.Message, tc.message) {
				t.Errorf("got %+v; want status %s, reason %s, transition %v, a message saying %q", c, tc.status, tc.reason, tc.transition, tc.message)
			}
		})
	}
}

func TestLoopbackAPIServer(t *testing.T) {
	for url, want := range map[string]string{
		"https://127.0.0.1:6443":   "127.0.0.1:6443",
		"https://127.0.0.2:7000/":  "127.0.0.2:7000",
		"https://localhost:6443":   "127.0.0.1:6443",
		"https://127.0.0.1":        "127.0.0.1:443",
		"https://10.1.2.3:6443":    "",
		"https://[::1]:6443":       "",
		"https://kube.example:443": "",
		"":                         "",
		"::nonsense":               "",
	} {
		if got := LoopbackAPIServer(url); got != want {
			t.Errorf("LoopbackAPIServer(%q) = %q, want %q", url, got, want)
		}
	}
}
