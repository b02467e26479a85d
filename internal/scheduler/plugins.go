package scheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// profilePlugins are the Filter and Score plugins of one profile in the framework's order,
// as the very instances upstream's runtime built for it, with the Score weights. The
// equivalence cache runs them one by one (equiv.go): the cacheable ones once per node and
// signature, the others every cycle, as RunFilterPlugins and RunScorePlugins would.
type profilePlugins struct {
	filter []fwk.FilterPlugin
	score  []fwk.ScorePlugin
	weight []int64 // of score[i]
	// affinity is the profile's InterPodAffinity (nil when not enabled), whose PreFilter
	// the scheduling loop tells each pod's signature (affinity.go).
	affinity *incrementalAffinity
}

// newProfile builds a profile's framework from upstream's in-tree registry, keeping the
// plugin instances the registry's factories return (the framework does not hand them
// out); InterPodAffinity is built as upstream's and wrapped (incrementalAffinity). plugins is nil when an enabled Filter or Score plugin was not seen built (an
// out-of-tree wrapper, say): the equivalence cache then leaves that profile alone.
func newProfile(ctx context.Context, p *config.KubeSchedulerProfile, opts ...frameworkruntime.Option) (framework.Framework, *profilePlugins, error) {
	built := map[string]fwk.Plugin{}
	registry := frameworkruntime.Registry{}
	for name, factory := range frameworkplugins.NewInTreeRegistry() {
		registry[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			pl, err := factory(ctx, args, h)
			if ipa, ok := pl.(*interpodaffinity.InterPodAffinity); ok && err == nil {
				pl = newIncrementalAffinity(ipa, h)
			}
			if err == nil && pl != nil {
				built[pl.Name()] = pl
			}
			return pl, err
		}
	}
	f, err := frameworkruntime.NewFramework(ctx, registry, p, opts...)
	if err != nil {
		return nil, nil, err
	}
	return f, pluginsOf(f, built), nil
}

func pluginsOf(f framework.Framework, built map[string]fwk.Plugin) *profilePlugins {
	l := f.ListPlugins()
	if l == nil {
		return &profilePlugins{}
	}
	pp := &profilePlugins{}
	pp.affinity, _ = built[names.InterPodAffinity].(*incrementalAffinity)
	for _, e := range l.Filter.Enabled {
		pl, ok := built[e.Name].(fwk.FilterPlugin)
		if !ok {
			return nil
		}
		pp.filter = append(pp.filter, pl)
	}
	for _, e := range l.Score.Enabled {
		pl, ok := built[e.Name].(fwk.ScorePlugin)
		if !ok {
			return nil
		}
		pp.score = append(pp.score, pl)
		pp.weight = append(pp.weight, int64(e.Weight))
	}
	return pp
}

// runFilter is RunFilterPlugins over the plugins of list (indexes into pp.filter, in
// order): the first that does not succeed decides, its status naming it; a status other
// than Unschedulable becomes an error.
func (pp *profilePlugins) runFilter(ctx context.Context, list []int, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (*fwk.Status, int) {
	for _, i := range list {
		pl := pp.filter[i]
		if s := pl.Filter(ctx, state, pod, ni); !s.IsSuccess() {
			if !s.IsRejected() {
				s = fwk.AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), s.AsError()))
			}
			s.SetPlugin(pl.Name())
			return s, i
		}
	}
	return nil, -1
}
