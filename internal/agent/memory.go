package agent

import (
	"context"
	"time"

	"kubeos.dev/kube/internal/agent/startupmem"
)

// startupSettle is how long after its start the agent releases its start-up memory
// (startupmem.Release): its informers have synced, containerd is up and the images are
// imported by then.
const startupSettle = 30 * time.Second

// releaseAfterStart runs startupmem.Release once, startupSettle after the agent started,
// unless ctx ends first.
func (a *Agent) releaseAfterStart(ctx context.Context) {
	t := time.NewTimer(startupSettle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	before := startupmem.ResidentMB()
	n, err := startupmem.Release()
	if err != nil {
		a.log.Warn("release start-up memory", "err", err)
		return
	}
	a.log.Info("released start-up memory", "readOnlyMappingsMB", n>>20, "rssBeforeMB", before, "rssAfterMB", startupmem.ResidentMB())
}
