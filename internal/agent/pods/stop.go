package pods

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// minimumGrace is the least time a container gets between its stop signal and SIGKILL,
// whatever its preStop hook used (the kubelet's minimumGracePeriodInSeconds).
const minimumGrace = 2

// stopping is one running container to stop.
type stopping struct {
	spec    *corev1.Container
	id      string
	sidecar bool
	// message is the Killing event's ("Stopping container <name>" when empty).
	message string
}

// stopContainers stops running containers within grace seconds as the kubelet's
// killContainer and terminationOrdering do: every preStop hook at once, bounded by the
// budget; regular and ephemeral containers then get their stop signal, and SIGKILL at
// the budget's end (at least minimumGrace seconds after the signal); a sidecar gets its
// signal only once every regular container and every sidecar after it in the spec have
// exited (or the budget ended). list is in spec order. It returns when all have stopped.
func (w *worker) stopContainers(ctx context.Context, pod *corev1.Pod, list []stopping, podIP string, grace int64) {
	m := w.m
	deadline := time.Now().Add(time.Duration(grace) * time.Second)
	var mains, all sync.WaitGroup
	mainsDone := make(chan struct{})
	var later chan struct{} // the done of the next sidecar in the spec
	for i := len(list) - 1; i >= 0; i-- {
		s := list[i]
		done := make(chan struct{})
		var after []chan struct{}
		if s.sidecar {
			after = append(after, mainsDone)
			if later != nil {
				after = append(after, later)
			}
			later = done
		} else {
			mains.Add(1)
		}
		all.Add(1)
		go func() {
			defer all.Done()
			defer close(done)
			if !s.sidecar {
				defer mains.Done()
			}
			if h := s.spec.Lifecycle; h != nil && h.PreStop != nil {
				hctx, cancel := context.WithDeadline(ctx, deadline)
				if err := m.runHook(hctx, pod, s.spec, s.id, podIP, h.PreStop); err != nil {
					m.event(pod, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %v", err))
				}
				cancel()
			}
			for _, ch := range after {
				t := time.NewTimer(time.Until(deadline))
				select {
				case <-ch:
				case <-t.C:
				case <-ctx.Done():
				}
				t.Stop()
			}
			left := max(int64(math.Ceil(time.Until(deadline).Seconds())), minimumGrace)
			msg := s.message
			if msg == "" {
				msg = "Stopping container " + s.spec.Name
			}
			m.event(pod, "Killing", msg)
			if err := m.opts.Runtime.StopContainer(ctx, s.id, left); err != nil {
				m.event(pod, "FailedKillPod", fmt.Sprintf("error killing container %s: %v", s.spec.Name, err))
			}
		}()
	}
	go func() {
		mains.Wait()
		close(mainsDone)
	}()
	all.Wait()
}
