package servicesnet

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"kubeos.dev/kube/test/netharness"
)

// TestAgentKill9: with node B's agent killed by SIGKILL its kernel rules keep a Service
// answering from node B; a Service made meanwhile is programmed once the agent is back,
// and the old one never stopped answering across the restart.
func TestAgentKill9(t *testing.T) {
	cs := c.Clientset(t)
	ns := netharness.Namespace(t, cs, nil)
	backend(t, cs, ns, "old-a", c.A.Name, "old")
	backend(t, cs, ns, "new-a", c.A.Name, "new")
	waitReady(t, cs, ns, "old-a", "new-a")
	old := service(t, cs, ns, "old", "old", nil)
	oldURL := fmt.Sprintf("http://%s/", old.Spec.ClusterIP)
	eventually(t, "old Service from node B", func() error { _, err := getFrom(context.Background(), c.B, oldURL); return err })

	// Probe the old Service from node B continuously from here on.
	var ok, failed atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := getFrom(ctx, c.B, oldURL); err != nil {
				failed.Add(1)
				lastErr.Store(err.Error())
			} else {
				ok.Add(1)
			}
			cancel()
		}
	}()
	defer func() { close(stop); <-done }()

	c.KillAgentB()
	restarted := false
	defer func() {
		if !restarted {
			_ = c.StartAgentB()
		}
	}()
	before := ok.Load()
	eventually(t, "old Service answers with the agent dead", func() error {
		if ok.Load() < before+5 {
			return fmt.Errorf("%d answers since the kill", ok.Load()-before)
		}
		return nil
	})
	nu := service(t, cs, ns, "new", "new", nil)
	newURL := fmt.Sprintf("http://%s/", nu.Spec.ClusterIP)
	if err := c.StartAgentB(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, "new Service from node B after the restart", func() error {
		body, err := getFrom(context.Background(), c.B, newURL)
		if err == nil && body != "new-a" {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
	n := ok.Load()
	eventually(t, "old Service still answers", func() error {
		if ok.Load() < n+5 {
			return fmt.Errorf("%d answers since", ok.Load()-n)
		}
		return nil
	})
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d requests to the old Service failed across kill and restart (last: %v)", f, f+ok.Load(), lastErr.Load())
	}
}
