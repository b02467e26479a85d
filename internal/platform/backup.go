package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/backup"
	"kubeos.dev/kube/internal/dataservices/nats"
	"kubeos.dev/kube/internal/dataservices/s3"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerBackup registers the Backup kind (scheduled dumps into a Bucket).
func registerBackup(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Backup]{Kind: "Backup",
		New: func() *v1alpha1.Backup { return &v1alpha1.Backup{} }, Driver: &backupDriver{o: o},
		MaxConcurrentReconciles: 4, ReconcileTimeout: 30 * time.Minute,
		Dependencies: func(b *v1alpha1.Backup) []lifecycle.Ref {
			return []lifecycle.Ref{{Kind: b.Spec.Source.Kind, Namespace: b.Namespace, Name: b.Spec.Source.Name},
				{Kind: "Bucket", Namespace: b.Namespace, Name: b.Spec.Target.Bucket}}
		}})
}

func init() { kindValidators["Backup"] = validateBackup }

// BackupSourceKinds are the kinds a Backup can back up.
var BackupSourceKinds = []string{"Database", "Cache", "Topic", "Volume"}

// cronParser takes 5 fields, or 6 with seconds first, and the @ descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a Backup's schedule in its time zone (empty: UTC). The zone goes in
// timeZone, not in a CRON_TZ= prefix.
func ParseSchedule(schedule, timeZone string) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	if timeZone != "" {
		l, err := time.LoadLocation(timeZone)
		if err != nil {
			return nil, nil, fmt.Errorf("time zone %q: %w", timeZone, err)
		}
		loc = l
	}
	if strings.HasPrefix(schedule, "TZ=") || strings.HasPrefix(schedule, "CRON_TZ=") {
		return nil, nil, errors.New("the time zone goes in spec.timeZone, not in the schedule")
	}
	if schedule == "" {
		return nil, loc, nil
	}
	s, err := cronParser.Parse(schedule)
	if err != nil {
		return nil, nil, err
	}
	return s, loc, nil
}

// retryFailedOnce is when a Backup without a schedule tries again after a failed run.
const retryFailedOnce = 30 * time.Second

// BackupDue decides a Backup's next run: the schedule's next time after the last run (or
// after created, before any), in loc; without a schedule, now until a run succeeded (a failed
// one is retried after 30 s). zero next means none.
func BackupDue(sched cron.Schedule, loc *time.Location, created, lastSuccess, lastFailure time.Time, now time.Time) (next time.Time, due bool) {
	last := lastSuccess
	if lastFailure.After(last) {
		last = lastFailure
	}
	if sched == nil {
		switch {
		case !lastSuccess.IsZero():
			return time.Time{}, false
		case !lastFailure.IsZero():
			next = lastFailure.Add(retryFailedOnce)
		default:
			next = created
		}
		return next, !now.Before(next)
	}
	if last.IsZero() {
		last = created
	}
	next = sched.Next(last.In(loc))
	return next, !now.Before(next)
}

// backupExt is the archive extension of a source kind.
func backupExt(kind string) string {
	switch kind {
	case "Database":
		return "pgdump"
	case "Cache":
		return "redis.jsonl.gz"
	case "Volume":
		return "tar.gz" // the volume's files (VolumeFiles.VolumeArchive)
	default:
		return "jetstream" // a JetStream snapshot and an export (internal/dataservices/backup)
	}
}

const archiveTimeFormat = "20060102T150405.000Z"

// BackupPrefix is where a Backup's archives lie in its bucket.
func BackupPrefix(namespace, name string) string { return namespace + "/" + name + "/" }

// ArchiveKey is the key of an archive made at t.
func ArchiveKey(namespace, name, kind string, t time.Time) string {
	return BackupPrefix(namespace, name) + t.UTC().Format(archiveTimeFormat) + "." + backupExt(kind)
}

// archiveTime reads the time back from an archive key; ok is false for a key that is not one.
func archiveTime(key string) (time.Time, bool) {
	base := path.Base(key)
	ts, _, ok := strings.Cut(base, ".")
	if !ok {
		return time.Time{}, false
	}
	// The format's ".000" makes the first dot part of the time.
	rest := strings.TrimPrefix(base, ts+".")
	ms, _, _ := strings.Cut(rest, ".")
	t, err := time.Parse(archiveTimeFormat, ts+"."+ms)
	return t, err == nil
}

// validateBackup refuses an unknown source kind, missing names, a schedule or time zone that
// does not parse and negative retention.
func validateBackup(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	var b v1alpha1.Backup
	if err := decodeKind(obj, &b); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	p := field.NewPath("spec")
	var errs field.ErrorList
	if !slices.Contains(BackupSourceKinds, b.Spec.Source.Kind) {
		errs = append(errs, field.NotSupported(p.Child("source", "kind"), b.Spec.Source.Kind, BackupSourceKinds))
	}
	if b.Spec.Source.Name == "" {
		errs = append(errs, field.Required(p.Child("source", "name"), ""))
	}
	if b.Spec.Target.Bucket == "" {
		errs = append(errs, field.Required(p.Child("target", "bucket"), ""))
	}
	if _, _, err := ParseSchedule(b.Spec.Schedule, ""); err != nil {
		errs = append(errs, field.Invalid(p.Child("schedule"), b.Spec.Schedule, err.Error()))
	}
	if b.Spec.TimeZone != "" {
		if _, err := time.LoadLocation(b.Spec.TimeZone); err != nil {
			errs = append(errs, field.Invalid(p.Child("timeZone"), b.Spec.TimeZone, err.Error()))
		}
	}
	r := b.Spec.Retention
	for name, v := range map[string]int32{"keepLast": r.KeepLast, "keepDaily": r.KeepDaily, "keepWeekly": r.KeepWeekly} {
		if v < 0 {
			errs = append(errs, field.Invalid(p.Child("retention", name), v, "must not be negative"))
		}
	}
	if r.TTL != nil && r.TTL.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("retention", "ttl"), r.TTL.Duration.String(), "must not be negative"))
	}
	if dp := b.Spec.DeletionPolicy; dp != "" && dp != v1alpha1.DeletionRetain && dp != v1alpha1.DeletionDelete {
		errs = append(errs, field.NotSupported(p.Child("deletionPolicy"), dp, []string{v1alpha1.DeletionRetain, v1alpha1.DeletionDelete}))
	}
	if old != nil {
		var o v1alpha1.Backup
		if err := decodeKind(old, &o); err == nil && o.Spec.Source != b.Spec.Source {
			errs = append(errs, field.Forbidden(p.Child("source"), "is immutable (its archives are of that source)"))
		}
	}
	return errs
}

type backupDriver struct{ o Options }

var _ lifecycle.Driver[*v1alpha1.Backup] = (*backupDriver)(nil)

func runTime(r *v1alpha1.BackupRun) time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.Time.Time
}

func failTime(f *v1alpha1.BackupFailure) time.Time {
	if f == nil {
		return time.Time{}
	}
	return f.Time.Time
}

// Observe decides whether a run is due; the object "exists" once it has been scheduled.
func (d *backupDriver) Observe(ctx context.Context, b *v1alpha1.Backup) (lifecycle.Outcome, error) {
	exists := b.Status.NextRun != nil || b.Status.LastSuccessful != nil || b.Status.LastFailure != nil
	if b.Spec.Suspend {
		b.Status.NextRun = nil
		return lifecycle.Outcome{Exists: true, UpToDate: true, Reason: "Suspended", Message: "no new runs are scheduled"}, nil
	}
	sched, loc, err := ParseSchedule(b.Spec.Schedule, b.Spec.TimeZone)
	if err != nil {
		return lifecycle.Outcome{Terminal: err, Reason: "BadSchedule"}, nil
	}
	now := d.o.Now()
	next, due := BackupDue(sched, loc, b.CreationTimestamp.Time, runTime(b.Status.LastSuccessful), failTime(b.Status.LastFailure), now)
	if next.IsZero() {
		b.Status.NextRun = nil
		return lifecycle.Outcome{Exists: true, UpToDate: true}, nil
	}
	b.Status.NextRun = &metav1.Time{Time: next}
	if due {
		return lifecycle.Outcome{Exists: exists, UpToDate: false}, nil
	}
	return lifecycle.Outcome{Exists: exists, UpToDate: true, RequeueAfter: next.Sub(now)}, nil
}

// Provision schedules the first run (and makes it, when it is due already).
func (d *backupDriver) Provision(ctx context.Context, b *v1alpha1.Backup) (lifecycle.Outcome, error) {
	sched, loc, err := ParseSchedule(b.Spec.Schedule, b.Spec.TimeZone)
	if err != nil {
		return lifecycle.Outcome{Terminal: err, Reason: "BadSchedule"}, nil
	}
	now := d.o.Now()
	next, due := BackupDue(sched, loc, b.CreationTimestamp.Time, time.Time{}, time.Time{}, now)
	if due {
		return d.Update(ctx, b)
	}
	b.Status.NextRun = &metav1.Time{Time: next}
	return lifecycle.Outcome{Reason: "Scheduled", Message: "next run " + next.In(loc).Format(time.RFC3339), RequeueAfter: next.Sub(now)}, nil
}

// backupSource is what a run dumps.
type backupSource struct {
	kind  string
	url   string // the server entry's admin URL
	name  string // database, key prefix or stream
	entry string
	// volume and files: a Volume's files, read through its node's agent.
	volume *v1alpha1.Volume
	files  *VolumeFiles
}

func (d *backupDriver) source(ctx context.Context, b *v1alpha1.Backup, tenant string) (backupSource, error) {
	key := client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Source.Name}
	src := backupSource{kind: b.Spec.Source.Kind}
	var serverKind, server string
	switch src.kind {
	case "Database":
		var db v1alpha1.Database
		if err := d.o.Client.Get(ctx, key, &db); err != nil {
			return src, err
		}
		src.name, serverKind, server = db.Status.DatabaseName, servers.PostgreSQL, firstNonEmpty(db.Status.Server, db.Spec.Server)
	case "Cache":
		var c v1alpha1.Cache
		if err := d.o.Client.Get(ctx, key, &c); err != nil {
			return src, err
		}
		src.name, serverKind, server = firstNonEmpty(c.Status.KeyPrefix, c.Spec.KeyPrefix, c.Namespace+"."+c.Name+":"), servers.Redis, firstNonEmpty(c.Status.Server, c.Spec.Server)
	case "Topic":
		var t v1alpha1.Topic
		if err := d.o.Client.Get(ctx, key, &t); err != nil {
			return src, err
		}
		src.name, serverKind, server = firstNonEmpty(t.Status.Stream, nats.StreamName(t.Namespace, t.Name)), servers.NATS, firstNonEmpty(t.Status.Server, t.Spec.Server)
	case "Volume":
		var v v1alpha1.Volume
		if err := d.o.Client.Get(ctx, key, &v); err != nil {
			return src, err
		}
		if d.o.VolumeFiles == nil {
			return src, fmt.Errorf("backups of Volumes need the node agents, which this server cannot reach")
		}
		if v.Status.VolumeName == "" {
			return src, fmt.Errorf("Volume %s: %w", key.Name, ErrVolumeNotBound)
		}
		src.name, src.volume, src.files = v.Status.VolumeName, &v, d.o.VolumeFiles
		return src, nil // no server entry: the files are on the node
	default:
		return src, fmt.Errorf("source kind %q", src.kind)
	}
	if src.name == "" {
		return src, fmt.Errorf("%s %s is not provisioned yet", src.kind, key.Name)
	}
	e, err := d.o.Servers.Resolve(ctx, serverKind, server, tenant)
	if err != nil {
		return src, err
	}
	src.url, src.entry = e.URL, e.Name
	return src, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// target is the admin client of the Backup's Bucket and the bucket's name.
func (d *backupDriver) target(ctx context.Context, namespace, bucket, tenant string) (*s3.Client, string, error) {
	return backupTarget(ctx, d.o, namespace, bucket, tenant)
}

func backupTarget(ctx context.Context, o Options, namespace, bucket, tenant string) (*s3.Client, string, error) {
	var bk v1alpha1.Bucket
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: bucket}, &bk); err != nil {
		return nil, "", err
	}
	if bk.Status.BucketName == "" {
		return nil, "", fmt.Errorf("bucket %s is not provisioned yet", bucket)
	}
	e, err := o.Servers.Resolve(ctx, servers.S3, bk.Spec.Server, tenant)
	if err != nil {
		return nil, "", err
	}
	return s3.NewClient(e.URL, string(e.Data[servers.KeyAccessKeyID]), string(e.Data[servers.KeySecretAccessKey]), string(e.Data[servers.KeyRegion])), bk.Status.BucketName, nil
}

// dump runs the source's tool into w.
func dump(ctx context.Context, src backupSource, w io.Writer) error {
	var err error
	switch src.kind {
	case "Database":
		err = backup.DumpPostgres(ctx, src.url, src.name, w)
	case "Cache":
		_, err = backup.DumpRedis(ctx, src.url, src.name, w)
	case "Topic":
		_, err = backup.DumpStream(ctx, src.url, src.name, w)
	case "Volume":
		var rc io.ReadCloser
		if rc, err = src.files.VolumeArchive(ctx, src.volume); err == nil {
			_, err = io.Copy(w, rc)
			rc.Close()
		}
	}
	return err
}

// Update makes a run: the tool's output streamed into the bucket, then the prune.
func (d *backupDriver) Update(ctx context.Context, b *v1alpha1.Backup) (lifecycle.Outcome, error) {
	tenant, err := TenantOf(ctx, d.o.Client, b.Namespace)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	src, err := d.source(ctx, b, tenant)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	tgt, bucket, err := d.target(ctx, b.Namespace, b.Spec.Target.Bucket, tenant)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	start := d.o.Now()
	key := ArchiveKey(b.Namespace, b.Name, src.kind, start)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(dump(ctx, src, pw)) }()
	size, err := tgt.PutStream(ctx, bucket, key, pr, os.TempDir())
	_ = pr.CloseWithError(errors.New("upload ended"))
	took := d.o.Now().Sub(start)
	sched, loc, _ := ParseSchedule(b.Spec.Schedule, b.Spec.TimeZone)
	if err != nil {
		_ = tgt.Delete(ctx, bucket, key)
		b.Status.LastFailure = &v1alpha1.BackupFailure{Time: metav1.Time{Time: start}, Error: err.Error()}
		next, _ := BackupDue(sched, loc, b.CreationTimestamp.Time, runTime(b.Status.LastSuccessful), start, d.o.Now())
		out := lifecycle.Outcome{Reason: "BackupFailed", Message: err.Error()}
		if !next.IsZero() {
			b.Status.NextRun = &metav1.Time{Time: next}
			out.RequeueAfter = max(next.Sub(d.o.Now()), time.Second)
		}
		return out, nil
	}
	run := v1alpha1.BackupRun{Time: metav1.Time{Time: start}, Archive: key, SizeBytes: size, Duration: &metav1.Duration{Duration: took}}
	b.Status.LastSuccessful = &run
	b.Status.History = append([]v1alpha1.BackupRun{run}, b.Status.History...)
	dropped, err := d.prune(ctx, b, tgt, bucket, loc)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	out := lifecycle.Outcome{Reason: "BackedUp", Message: fmt.Sprintf("%s %s: %d bytes in %s to %s/%s (%d pruned)", src.kind, b.Spec.Source.Name, size, took.Round(time.Millisecond), bucket, key, dropped)}
	next, _ := BackupDue(sched, loc, b.CreationTimestamp.Time, start, failTime(b.Status.LastFailure), d.o.Now())
	if next.IsZero() {
		b.Status.NextRun = nil
	} else {
		b.Status.NextRun = &metav1.Time{Time: next}
		out.RequeueAfter = max(next.Sub(d.o.Now()), time.Second)
	}
	return out, nil
}

// prune deletes the archives the retention drops and sets the history to those kept.
func (d *backupDriver) prune(ctx context.Context, b *v1alpha1.Backup, tgt *s3.Client, bucket string, loc *time.Location) (int, error) {
	objs, err := tgt.List(ctx, bucket, BackupPrefix(b.Namespace, b.Name))
	if err != nil {
		return 0, err
	}
	known := map[string]v1alpha1.BackupRun{}
	for _, r := range b.Status.History {
		known[r.Archive] = r
	}
	var archives []backup.Archive
	for _, o := range objs {
		if t, ok := archiveTime(o.Key); ok {
			archives = append(archives, backup.Archive{Key: o.Key, Time: t, Good: true})
			if _, ok := known[o.Key]; !ok {
				known[o.Key] = v1alpha1.BackupRun{Time: metav1.Time{Time: t}, Archive: o.Key, SizeBytes: o.Size}
			}
		}
	}
	r := b.Spec.Retention
	ret := backup.Retention{KeepLast: int(r.KeepLast), KeepDaily: int(r.KeepDaily), KeepWeekly: int(r.KeepWeekly)}
	if r.TTL != nil {
		ret.TTL = r.TTL.Duration
	}
	if loc == nil {
		loc = time.UTC
	}
	keep, drop := backup.Prune(archives, ret, d.o.Now().In(loc))
	for _, a := range drop {
		if err := tgt.Delete(ctx, bucket, a.Key); err != nil {
			return 0, err
		}
	}
	b.Status.History = b.Status.History[:0]
	for _, a := range keep {
		b.Status.History = append(b.Status.History, known[a.Key])
	}
	return len(drop), nil
}

// Deprovision removes the archives with deletionPolicy Delete and keeps them otherwise.
func (d *backupDriver) Deprovision(ctx context.Context, b *v1alpha1.Backup) (lifecycle.Outcome, error) {
	if b.Spec.DeletionPolicy != v1alpha1.DeletionDelete {
		return lifecycle.Outcome{Reason: "ArchivesRetained", Message: "archives kept under " + BackupPrefix(b.Namespace, b.Name)}, nil
	}
	tenant, err := TenantOf(ctx, d.o.Client, b.Namespace)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	tgt, bucket, err := d.target(ctx, b.Namespace, b.Spec.Target.Bucket, tenant)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	objs, err := tgt.List(ctx, bucket, BackupPrefix(b.Namespace, b.Name))
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	for _, o := range objs {
		if err := tgt.Delete(ctx, bucket, o.Key); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	return lifecycle.Outcome{Reason: "ArchivesDeleted", Message: fmt.Sprintf("%d archives under %s", len(objs), BackupPrefix(b.Namespace, b.Name))}, nil
}

// openBackupArchive opens archive (empty: the last successful one) of Backup backup in
// namespace for a restore, with the kind of the Backup's source (Database, Cache, Topic).
func openBackupArchive(ctx context.Context, o Options, namespace, name, archive string) (sourceKind string, rc io.ReadCloser, err error) {
	var b v1alpha1.Backup
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &b); err != nil {
		return "", nil, fmt.Errorf("backup %s: %w", name, err)
	}
	if archive == "" {
		if b.Status.LastSuccessful == nil {
			return b.Spec.Source.Kind, nil, fmt.Errorf("backup %s has no successful archive yet", name)
		}
		archive = b.Status.LastSuccessful.Archive
	}
	if !strings.HasPrefix(archive, BackupPrefix(namespace, name)) {
		return b.Spec.Source.Kind, nil, fmt.Errorf("%s is not an archive of backup %s", archive, name)
	}
	tenant, err := TenantOf(ctx, o.Client, namespace)
	if err != nil {
		return "", nil, err
	}
	tgt, bucket, err := backupTarget(ctx, o, namespace, b.Spec.Target.Bucket, tenant)
	if err != nil {
		return b.Spec.Source.Kind, nil, err
	}
	rc, err = tgt.Get(ctx, bucket, archive)
	if err != nil {
		return b.Spec.Source.Kind, nil, err
	}
	return b.Spec.Source.Kind, rc, nil
}
