// Package cronjob is the CronJob controller: it creates a CronJob's Jobs on its schedule
// (cron syntax, timeZone), applying concurrencyPolicy (Allow, Forbid, Replace),
// startingDeadlineSeconds and upstream's missed-schedule handling, names Jobs
// <cronjob>-<scheduled minute>, records lastScheduleTime/lastSuccessfulTime and active
// Jobs, and deletes finished Jobs beyond the history limits.
//
// It runs upstream's own controller (k8s.io/kubernetes/pkg/controller/cronjob, v2,
// kube-controller-manager's cronjob-controller) over the API with client-go informers and
// its own identity (system:kube-controller:cronjob-controller), on the holder of the
// kube-system/kube-cronjob-controller Lease.
package cronjob
