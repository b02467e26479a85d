package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addLifecycleFlags choose the lifecycle engine's event bus and the Alerts' evaluation interval.
func addLifecycleFlags(f *pflag.FlagSet, o *server.LifecycleOptions) {
	f.StringVar(&o.EventBus, "event-bus", "memory", "event bus of the lifecycle engine: memory or redis")
	f.StringVar(&o.RedisAddr, "redis-addr", "", "host:port of the Redis server (--event-bus=redis)")
	f.DurationVar(&o.AlertInterval, "alert-evaluation-interval", 0, "how often Alerts are evaluated (0: 15s)")
}
