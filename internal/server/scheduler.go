package server

// SchedulerOptions configure the in-process scheduler (internal/scheduler).
type SchedulerOptions struct{}

func (o *SchedulerOptions) validate() error { return nil }

// schedulerControllers are elected controllers of the in-process scheduler (internal/scheduler); startElectedControllers runs them
// after electedControllers.
var schedulerControllers []electedController
