package scheduler

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	configv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"

	kubeschedulerv1 "k8s.io/kube-scheduler/config/v1"
)

// DefaultConfig is kube-scheduler's configuration when it is given none: one profile,
// default-scheduler, with the default plugins and weights (upstream's defaulting).
func DefaultConfig() (*config.KubeSchedulerConfiguration, error) {
	var versioned kubeschedulerv1.KubeSchedulerConfiguration
	scheme.Scheme.Default(&versioned)
	cfg := &config.KubeSchedulerConfiguration{}
	if err := scheme.Scheme.Convert(&versioned, cfg, nil); err != nil {
		return nil, fmt.Errorf("default scheduler configuration: %w", err)
	}
	cfg.TypeMeta.APIVersion = configv1.SchemeGroupVersion.String()
	return cfg, validate(cfg)
}

// LoadConfigFile reads a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) as
// kube-scheduler's --config does: strict decoding (an unknown or duplicate field is an
// error), upstream's defaulting, upstream's validation, and every plugin named in a profile
// must exist in the in-tree registry.
func LoadConfigFile(path string) (*config.KubeSchedulerConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	cfg, err := decodeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("scheduler config %s: %w", path, err)
	}
	return cfg, nil
}

func decodeConfig(data []byte) (*config.KubeSchedulerConfiguration, error) {
	// scheme.Codecs is strict (serializer.EnableStrict); the universal decoder defaults and
	// converts to the internal type.
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("not a KubeSchedulerConfiguration: %s", gvk)
	}
	if gvk.GroupVersion() != configv1.SchemeGroupVersion {
		return nil, fmt.Errorf("apiVersion %s: only %s is read", gvk.GroupVersion(), configv1.SchemeGroupVersion)
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	return cfg, validate(cfg)
}

// validate runs upstream's validation and refuses plugins the in-tree registry does not
// have (kube-scheduler finds those only when it builds the profile).
func validate(cfg *config.KubeSchedulerConfiguration) error {
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return err
	}
	if len(cfg.Profiles) == 0 {
		return errors.New("at least one profile is required")
	}
	known := sets.KeySet(frameworkplugins.NewInTreeRegistry())
	var errs []error
	for _, p := range cfg.Profiles {
		for _, name := range profilePluginNames(&p) {
			if !known.Has(name) {
				errs = append(errs, fmt.Errorf("profile %q: plugin %q does not exist", p.SchedulerName, name))
			}
		}
		for _, pc := range p.PluginConfig {
			if !known.Has(pc.Name) {
				errs = append(errs, fmt.Errorf("profile %q: pluginConfig for plugin %q, which does not exist", p.SchedulerName, pc.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// profilePluginNames lists every plugin a profile enables, at any extension point (the
// wildcard "*" in a disabled list is not a plugin).
func profilePluginNames(p *config.KubeSchedulerProfile) []string {
	if p.Plugins == nil {
		return nil
	}
	pl := p.Plugins
	var names []string
	for _, set := range []config.PluginSet{pl.PreEnqueue, pl.QueueSort, pl.PreFilter, pl.Filter, pl.PostFilter, pl.PreScore, pl.Score,
		pl.Reserve, pl.Permit, pl.PreBind, pl.Bind, pl.PostBind, pl.PlacementGenerate, pl.PlacementScore, pl.PodGroupPostFilter, pl.MultiPoint} {
		for _, e := range set.Enabled {
			names = append(names, e.Name)
		}
		for _, d := range set.Disabled {
			if d.Name != "*" {
				names = append(names, d.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
