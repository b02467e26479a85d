package lifecycle

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestRollingRollsBackPastTheDeadline: a Rolling revision whose new pods crash-loop is rolled
// back by itself once its progress deadline passes — the Component and its Deployment run
// the old image again, and the history says why with the pods' reason.
func TestRollingRollsBackPastTheDeadline(t *testing.T) {
	releaseSuite.Need(t)
	apply(t, component(rollingBadComponent, "example.com/rollbad:1", 2))
	waitComponentActive(t, rollingBadComponent)
	apply(t, fmt.Sprintf(`apiVersion: kubeos.dev/v1alpha1
kind: Release
metadata: {name: rollbad}
spec:
  component: %s
  image: %s
  progressDeadlineSeconds: 10
  strategy: {type: Rolling}
`, rollingBadComponent, rollingBadImage))
	releaseEventually(t, 2*time.Minute, func() error {
		if r := release(t, "rollbad"); r.Status.ReleasePhase != v1alpha1.ReleaseRolledBack {
			return fmt.Errorf("release %+v", r.Status)
		}
		return nil
	})
	h := release(t, "rollbad").Status.History
	if len(h) != 1 || h[0].Outcome != v1alpha1.ReleaseRolledBack || h[0].Image != rollingBadImage || !strings.Contains(h[0].Message, "CrashLoopBackOff") {
		t.Fatalf("history %+v", h)
	}
	if c := get(t, &v1alpha1.Component{}, rollingBadComponent); c.Spec.Image != "example.com/rollbad:1" {
		t.Fatalf("component image %s after the rollback", c.Spec.Image)
	}
	releaseEventually(t, time.Minute, func() error {
		d := get(t, &appsv1.Deployment{}, rollingBadComponent)
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "example.com/rollbad:1" || d.Status.UpdatedReplicas != 2 || d.Status.AvailableReplicas != 2 {
			return fmt.Errorf("deployment image %s updated %d available %d", img, d.Status.UpdatedReplicas, d.Status.AvailableReplicas)
		}
		return nil
	})
	if err := hasAll(eventReasons(t, "rollbad"), "RevisionStarted", "RolledBack"); err != nil {
		t.Fatal(err)
	}
}
