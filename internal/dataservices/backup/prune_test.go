package backup

import (
	"slices"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	at := func(key string, ago time.Duration, good bool) Archive {
		return Archive{Key: key, Time: now.Add(-ago), Good: good}
	}
	h, d := time.Hour, 24*time.Hour
	hourly := []Archive{at("a", 1*h, true), at("b", 2*h, true), at("c", 3*h, true), at("d", 4*h, true)}
	daily := []Archive{
		at("d0a", 1*h, true), at("d0b", 2*h, true), // today
		at("d1a", d+1*h, true), at("d1b", d+2*h, true), // yesterday
		at("d2", 2*d, true), at("d8", 8*d, true), at("d15", 15*d, true), at("d30", 30*d, true),
	}
	for _, tc := range []struct {
		name     string
		archives []Archive
		r        Retention
		keep     []string
	}{
		{"nothing set keeps all", hourly, Retention{}, []string{"a", "b", "c", "d"}},
		{"keepLast 2", hourly, Retention{KeepLast: 2}, []string{"a", "b"}},
		{"keepLast larger than the list", hourly, Retention{KeepLast: 10}, []string{"a", "b", "c", "d"}},
		{"unsorted input", []Archive{hourly[2], hourly[0], hourly[3], hourly[1]}, Retention{KeepLast: 2}, []string{"a", "b"}},
		{"keepDaily 3: the newest of each of the 3 last days", daily, Retention{KeepDaily: 3}, []string{"d0a", "d1a", "d2"}},
		// 2026-12-10 is in ISO week 50: d0a..d2 (week 50), d8 (49), d15 (48), d30 (46).
		{"keepWeekly 2", daily, Retention{KeepWeekly: 2}, []string{"d0a", "d8"}},
		{"ttl 90m", hourly, Retention{TTL: 90 * time.Minute}, []string{"a"}},
		{"rules add up", daily, Retention{KeepLast: 1, KeepWeekly: 3, TTL: 90 * time.Minute}, []string{"d0a", "d8", "d15"}},
		{"ttl drops all old: the newest good one stays", []Archive{at("old", 10*d, true), at("older", 11*d, true)}, Retention{TTL: time.Hour}, []string{"old"}},
		{"failed archives are kept by no rule", []Archive{at("bad", 1*h, false), at("good", 2*h, true), at("good2", 3*h, true)}, Retention{KeepLast: 1}, []string{"good"}},
		{"only failed ones", []Archive{at("bad", 1*h, false)}, Retention{KeepLast: 3}, nil},
		{"empty", nil, Retention{KeepLast: 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, drop := Prune(tc.archives, tc.r, now)
			var got []string
			for _, a := range keep {
				got = append(got, a.Key)
			}
			if !slices.Equal(got, tc.keep) {
				t.Errorf("keep = %v, want %v", got, tc.keep)
			}
			if len(keep)+len(drop) != len(tc.archives) {
				t.Errorf("keep %d + drop %d != %d archives", len(keep), len(drop), len(tc.archives))
			}
			for _, a := range drop {
				if slices.Contains(got, a.Key) {
					t.Errorf("%s both kept and dropped", a.Key)
				}
			}
		})
	}
}

func TestPruneDayInLocation(t *testing.T) {
	// 23:30 UTC on the 9th is the 10th in Berlin: with now in Berlin, both archives fall on the
	// same day and keepDaily 1 keeps only the newer.
	berlin := time.FixedZone("CET", 3600)
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, berlin)
	as := []Archive{
		{Key: "late", Time: time.Date(2026, 12, 9, 23, 30, 0, 0, time.UTC), Good: true},
		{Key: "noon", Time: time.Date(2026, 12, 10, 10, 0, 0, 0, time.UTC), Good: true},
	}
	keep, _ := Prune(as, Retention{KeepDaily: 1}, now)
	if len(keep) != 1 || keep[0].Key != "noon" {
		t.Errorf("keep = %v", keep)
	}
}
