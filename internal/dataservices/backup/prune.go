package backup

import (
	"fmt"
	"sort"
	"time"
)

// Retention says which archives to keep; an archive is kept if any rule keeps it. All zero
// keeps everything.
type Retention struct {
	// KeepLast keeps the newest n archives.
	KeepLast int
	// KeepDaily keeps the newest archive of each of the n most recent days that have one.
	KeepDaily int
	// KeepWeekly keeps the newest archive of each of the n most recent ISO weeks that have one.
	KeepWeekly int
	// TTL keeps the archives younger than it.
	TTL time.Duration
}

// Archive is one archive as Prune sees it.
type Archive struct {
	Key  string
	Time time.Time
	// Good is false for an archive whose backup did not complete; it is kept by no rule
	// (except as the newest good one, which it is not).
	Good bool
}

// Prune splits archives into those the retention keeps and those it drops, both newest first.
// Days and weeks are those of now's location. The newest good archive is always kept.
func Prune(archives []Archive, r Retention, now time.Time) (keep, drop []Archive) {
	as := append([]Archive(nil), archives...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].Time.After(as[j].Time) })
	all := r.KeepLast <= 0 && r.KeepDaily <= 0 && r.KeepWeekly <= 0 && r.TTL <= 0
	kept := make([]bool, len(as))
	newestGood := -1
	for i, a := range as {
		if a.Good && newestGood < 0 {
			newestGood = i
		}
	}
	if newestGood >= 0 {
		kept[newestGood] = true
	}
	last, days, weeks := 0, map[string]bool{}, map[string]bool{}
	for i, a := range as {
		if !a.Good {
			continue
		}
		if all {
			kept[i] = true
			continue
		}
		if last < r.KeepLast {
			kept[i] = true
			last++
		}
		t := a.Time.In(now.Location())
		if day := t.Format("2006-01-02"); !days[day] && len(days) < r.KeepDaily {
			days[day] = true
			kept[i] = true
		}
		y, w := t.ISOWeek()
		if week := fmt.Sprintf("%d-%02d", y, w); !weeks[week] && len(weeks) < r.KeepWeekly {
			weeks[week] = true
			kept[i] = true
		}
		if r.TTL > 0 && now.Sub(a.Time) < r.TTL {
			kept[i] = true
		}
	}
	for i, a := range as {
		if kept[i] {
			keep = append(keep, a)
		} else {
			drop = append(drop, a)
		}
	}
	return keep, drop
}
