package cli

import (
	"strconv"

	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addSchedulerFlags adds the flags of the in-process scheduler (internal/scheduler).
func addSchedulerFlags(f *pflag.FlagSet, o *server.SchedulerOptions) {
	fl := f.VarPF(&enabled{off: &o.DisableScheduler}, "scheduler", "",
		"run the in-process scheduler (upstream's default profile semantics); --scheduler=false leaves scheduling to an external kube-scheduler")
	fl.NoOptDefVal = "true"
	f.StringVar(&o.SchedulerConfigFile, "scheduler-config", o.SchedulerConfigFile,
		"a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1: profiles, plugins, weights, percentageOfNodesToScore), decoded strictly as kube-scheduler's --config")
}

// enabled is a boolean flag stored as its negation (the options' zero value runs the
// scheduler).
type enabled struct{ off *bool }

func (e *enabled) String() string {
	if e.off == nil {
		return "true"
	}
	return strconv.FormatBool(!*e.off)
}

func (e *enabled) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*e.off = !v
	return nil
}

func (e *enabled) Type() string     { return "bool" }
func (e *enabled) IsBoolFlag() bool { return true }
