package agent

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's graceful node shutdown status.
const (
	shutdownReason   = "Terminated"
	shutdownMessage  = "Pod was terminated in response to imminent node shutdown."
	shutdownNotReady = "node is shutting down"
	// The kubelet's refusal of a pod that arrives during the shutdown.
	shutdownRejectReason  = "NodeShutdown"
	shutdownRejectMessage = "Pod was rejected as the node is shutting down."
	// systemCriticalPriority is scheduling's SystemCriticalPriority: pods at or above it
	// are the critical ones, stopped last.
	systemCriticalPriority = 2000000000
)

// admit refuses new pods once the node is shutting down, as the kubelet's node shutdown
// manager does.
func (a *Agent) admit(*corev1.Pod) (reason, message string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shuttingDown {
		return shutdownRejectReason, shutdownRejectMessage, false
	}
	return "", "", true
}

// shutdownGroup is pods stopped together within period.
type shutdownGroup struct {
	period time.Duration
	pods   []*corev1.Pod
}

// shutdownGroups splits the node's running pods as the kubelet's graceful node shutdown
// does: regular pods first within total-critical, then critical pods (priority at or above
// system-critical) within critical. Empty groups are left out. Pure.
func shutdownGroups(pods []*corev1.Pod, total, critical time.Duration) []shutdownGroup {
	critical = min(critical, total)
	regular := shutdownGroup{period: total - critical}
	crit := shutdownGroup{period: critical}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.Priority != nil && *p.Spec.Priority >= systemCriticalPriority {
			crit.pods = append(crit.pods, p)
		} else {
			regular.pods = append(regular.pods, p)
		}
	}
	var out []shutdownGroup
	for _, g := range []shutdownGroup{regular, crit} {
		if len(g.pods) > 0 {
			sort.SliceStable(g.pods, func(i, j int) bool { return prio(g.pods[i]) < prio(g.pods[j]) })
			out = append(out, g)
		}
	}
	return out
}

func prio(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// shutdownGrace is a pod's grace period within its group's: its own when shorter. Pure.
func shutdownGrace(p *corev1.Pod, period time.Duration) int64 {
	g := int64(period / time.Second)
	if t := p.Spec.TerminationGracePeriodSeconds; t != nil && *t < g {
		g = *t
	}
	return max(g, 1)
}

// killer stops a pod with a terminal status (pods.Manager.Kill).
type killer interface {
	Kill(ctx context.Context, uid types.UID, grace int64, reason, message string) error
	Pods() []*corev1.Pod
}

// shutdown is the graceful node shutdown: the node reports NotReady ("node is shutting
// down"), then each group of pods is stopped in turn within its period, with the
// kubelet's status (phase Failed, reason Terminated, the DisruptionTarget condition).
func (a *Agent) shutdown(ctx context.Context, k killer) {
	total, critical := a.opts.ShutdownGracePeriod, a.opts.ShutdownGracePeriodCriticalPods
	a.log.Info("node shutting down", "gracePeriod", total, "criticalPods", critical)
	a.mu.Lock()
	a.shuttingDown = true
	a.mu.Unlock()
	statusCtx, cancel := context.WithTimeout(ctx, min(5*time.Second, total))
	a.writeStatus(statusCtx)
	cancel()
	for _, g := range shutdownGroups(k.Pods(), total, critical) {
		// The pods' grace periods fit in the group's; the headroom is for their status.
		gctx, cancel := context.WithTimeout(ctx, g.period+2*time.Second)
		var wg sync.WaitGroup
		for _, p := range g.pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := k.Kill(gctx, p.UID, shutdownGrace(p, g.period), shutdownReason, shutdownMessage); err != nil {
					a.log.Warn("shutdown: stop pod", "pod", p.Namespace+"/"+p.Name, "err", err)
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-gctx.Done():
			a.log.Warn("shutdown: pods still stopping at the end of their period", "period", g.period)
		}
		cancel()
	}
	a.log.Info("node shutdown done")
}
