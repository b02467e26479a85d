package agent

import (
	"context"
	"time"

	"kubeos.dev/kube/internal/agent/startupmem"
)

const (
	// startupSettle is how long after its start the agent releases its start-up memory
	// (startupmem.Release): its informers have synced, containerd is up and the images are
	// imported by then.
	startupSettle = 30 * time.Second
	// trimEvery is how often the agent looks whether the binary's pages came back into its
	// resident set (a burst of pod starts touches code an idle node does not run), and
	// trimGrowthMB how many MiB above its working set (the file-backed resident set one
	// trimEvery after the last release) call for another trim.
	trimEvery    = time.Minute
	trimGrowthMB = 8
)

// releaseAfterStart runs startupmem.Release once, startupSettle after the agent started,
// then startupmem.Trim whenever the file-backed resident set grew by trimGrowthMB above the
// working set, looked at every trimEvery, until ctx ends. The working set is what the agent
// touched again in the trimEvery after a release: trimming it would only fault it back.
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
	base := int64(-1) // the working set, read at the first tick after a release
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		file := startupmem.FileResidentMB()
		if base < 0 {
			base = file
			continue
		}
		if file-base < trimGrowthMB {
			continue
		}
		if _, err := startupmem.Trim(); err != nil {
			a.log.Warn("trim the binary's pages", "err", err)
			return
		}
		a.log.Info("trimmed the binary's pages", "fileMBBefore", file, "workingSetMB", base, "fileMBAfter", startupmem.FileResidentMB())
		base = -1
	}
}
