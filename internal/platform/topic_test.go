package platform

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

func TestSubjectProblem(t *testing.T) {
	for s, bad := range map[string]bool{
		"acme.orders":      false,
		"acme.orders.>":    false,
		"acme.*.created":   false,
		"acme.":            true,
		"acme":             true,
		"other.orders":     true,
		">":                true,
		"acme.>.x":         true,
		"acme.or*":         true,
		"acme..x":          true,
		"acme.a b":         true,
		"acmeco.orders":    true,
		"acme.orders.v1.>": false,
	} {
		if got := subjectProblem(s, "acme.") != ""; got != bad {
			t.Errorf("subjectProblem(%q) bad = %v, want %v", s, got, bad)
		}
	}
}

func TestBucketName(t *testing.T) {
	b := &v1alpha1.Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "media"}}
	if got := BucketName(b); got != "team-a-media" {
		t.Errorf("default = %q", got)
	}
	b.Name = "a-very-long-name-that-goes-on-and-on-and-on-beyond-what-s3-allows"
	if got := BucketName(b); len(got) > 63 || !bucketNameRE.MatchString(got) {
		t.Errorf("long = %q (%d)", got, len(got))
	}
	b.Spec.BucketName = "given"
	if got := BucketName(b); got != "given" {
		t.Errorf("given = %q", got)
	}
}

func TestBackupDue(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
	every5, loc, err := ParseSchedule("*/5 * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	secs, _, err := ParseSchedule("*/20 * * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	daily2am, berlin, err := ParseSchedule("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m, s int) time.Time { return time.Date(2026, 12, 1, h, m, s, 0, time.UTC) }
	for _, tc := range []struct {
		name             string
		sched            any
		loc              *time.Location
		lastOK, lastFail time.Time
		now              time.Time
		wantNext         time.Time
		wantDue          bool
	}{
		{"before the first", every5, loc, time.Time{}, time.Time{}, at(10, 3, 0), at(10, 5, 0), false},
		{"first due", every5, loc, time.Time{}, time.Time{}, at(10, 5, 0), at(10, 5, 0), true},
		{"after a run", every5, loc, at(10, 5, 1), time.Time{}, at(10, 7, 0), at(10, 10, 0), false},
		{"a failure counts as a run", every5, loc, at(10, 5, 1), at(10, 10, 2), at(10, 12, 0), at(10, 15, 0), false},
		{"missed runs: one run, now", every5, loc, at(10, 5, 1), time.Time{}, at(11, 0, 0), at(10, 10, 0), true},
		{"seconds", secs, loc, at(10, 0, 40), time.Time{}, at(10, 0, 50), at(10, 1, 0), false},
		{"time zone: 02:00 Berlin is 01:00 UTC", daily2am, berlin, time.Time{}, time.Time{}, at(10, 0, 0), time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC), false},
		{"once: not yet run", nil, loc, time.Time{}, time.Time{}, at(10, 1, 0), created, true},
		{"once: done", nil, loc, at(10, 1, 0), time.Time{}, at(10, 2, 0), time.Time{}, false},
		{"once: failed, retried after 30s", nil, loc, time.Time{}, at(10, 1, 0), at(10, 1, 10), at(10, 1, 30), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var next time.Time
			var due bool
			if s, ok := tc.sched.(interface{ Next(time.Time) time.Time }); ok {
				next, due = BackupDue(s, tc.loc, created, tc.lastOK, tc.lastFail, tc.now)
			} else {
				next, due = BackupDue(nil, tc.loc, created, tc.lastOK, tc.lastFail, tc.now)
			}
			if !next.Equal(tc.wantNext) || due != tc.wantDue {
				t.Errorf("next, due = %v, %v; want %v, %v", next, due, tc.wantNext, tc.wantDue)
			}
		})
	}
}

func TestParseScheduleRefuses(t *testing.T) {
	for _, s := range []string{"* * *", "61 * * * *", "CRON_TZ=UTC * * * * *", "every minute"} {
		if _, _, err := ParseSchedule(s, ""); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", s)
		}
	}
	if _, _, err := ParseSchedule("* * * * *", "Mars/Olympus"); err == nil {
		t.Error("an unknown time zone accepted")
	}
}

func TestArchiveKey(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 5, 1, 234e6, time.UTC)
	k := ArchiveKey("team-a", "nightly", "Database", at)
	if k != "team-a/nightly/20261201T100501.234Z.pgdump" {
		t.Errorf("key = %q", k)
	}
	if got, ok := archiveTime(k); !ok || !got.Equal(at) {
		t.Errorf("archiveTime = %v, %v", got, ok)
	}
	if _, ok := archiveTime("team-a/nightly/notes.txt"); ok {
		t.Error("a foreign key parsed as an archive")
	}
}
