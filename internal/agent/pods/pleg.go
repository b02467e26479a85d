package pods

import (
	"context"
	"hash/fnv"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// relistPeriod is how often the node's sandboxes and containers are listed: the kubelet's
// generic PLEG period. containerd 1.6 has no CRI container events, so a relist is how a
// container's exit is noticed.
const relistPeriod = time.Second

// idleResync is how often a settled pod (every container running, nothing waiting) is
// synced when nothing pokes it: its changes come from the relist, the informer and its
// probes, so this only refreshes what has a clock (ConfigMap, Secret and projected volumes,
// tokens). It is the kubelet's --sync-frequency default: a ConfigMap's change reaches a
// settled pod's volume within about a minute, as upstream documents. (It was 10 s: each
// settled pod then cost the runtime a status round every 10 s.)
const idleResync = time.Minute

// relist is the agent's pod lifecycle event generator: one ListPodSandbox and one
// ListContainers of the whole node every relistPeriod, each pod's sandboxes and containers
// reduced to a fingerprint (ids, states, attempts); a pod whose fingerprint changed since
// the previous relist gets its worker poked. It runs until ctx ends.
func (m *Manager) relist(ctx context.Context) {
	prev := map[types.UID]uint64{}
	tick := time.NewTicker(relistPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sbs, err := m.opts.Runtime.ListPodSandbox(ctx, nil)
		if err != nil {
			continue
		}
		cs, err := m.opts.Runtime.ListContainers(ctx, nil)
		if err != nil {
			continue
		}
		cur := fingerprints(sbs, cs)
		for uid, f := range cur {
			if prev[uid] != f {
				m.pokeWorker(uid)
			}
		}
		for uid := range prev {
			if _, ok := cur[uid]; !ok {
				m.pokeWorker(uid)
			}
		}
		prev = cur
	}
}

// fingerprints reduces each pod's sandboxes and containers (by the pod UID label) to a
// hash of their ids, states and attempts. Pure.
func fingerprints(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) map[types.UID]uint64 {
	parts := map[types.UID][]string{}
	for _, sb := range sbs {
		uid := types.UID(sb.Labels[labelPodUID])
		parts[uid] = append(parts[uid], "s"+sb.Id+sb.State.String())
	}
	for _, c := range cs {
		uid := types.UID(c.Labels[labelPodUID])
		parts[uid] = append(parts[uid], "c"+c.Id+c.State.String())
	}
	out := make(map[types.UID]uint64, len(parts))
	for uid, p := range parts {
		sort.Strings(p)
		h := fnv.New64a()
		for _, s := range p {
			_, _ = h.Write([]byte(s))
			_, _ = h.Write([]byte{0})
		}
		out[uid] = h.Sum64()
	}
	return out
}

func (m *Manager) pokeWorker(uid types.UID) {
	m.mu.Lock()
	w := m.workers[uid]
	m.mu.Unlock()
	if w != nil {
		w.poke()
	}
}
