package watchcache

import (
	"sort"
	"time"
)

// ring keeps the most recent events in revision order. It holds every event after start:
// a watch may resume from any revision >= start.
//
// Its capacity moves between min and max as kube-apiserver's watch cache does: when it is
// full and its oldest event is younger than fresh, it doubles (a busy resource keeps about
// fresh's worth of history, so a watcher that reconnects after a pause of a few seconds
// resumes instead of re-listing everything); when it is full and even its newest quarter is
// older than fresh, it halves. min == max is a fixed size.
type ring struct {
	buf   []*Event
	times []time.Time // when each event of buf was pushed
	head  int         // index of the oldest event
	n     int
	start int64

	min, max int
	fresh    time.Duration
}

// newRing holds lo events at first and grows toward hi (lo when hi is less) while they are
// younger than fresh.
func newRing(lo, hi int, fresh time.Duration, start int64) *ring {
	hi = max(lo, hi)
	return &ring{buf: make([]*Event, lo), times: make([]time.Time, lo), start: start, min: lo, max: hi, fresh: fresh}
}

// push appends ev, pushed at now, evicting the oldest event when full.
func (r *ring) push(ev *Event, now time.Time) {
	if r.n == len(r.buf) {
		r.resize(now)
	}
	if r.n == len(r.buf) {
		old := r.buf[r.head]
		r.buf[r.head], r.times[r.head] = ev, now
		r.head = (r.head + 1) % len(r.buf)
		// Every event after old's revision is still held (events of one revision are
		// consecutive, and the later ones of old's revision do not matter to a watch that
		// resumes from it).
		r.start = old.Revision
		return
	}
	i := (r.head + r.n) % len(r.buf)
	r.buf[i], r.times[i] = ev, now
	r.n++
}

// resize grows or shrinks a full ring by the age of its events (kube-apiserver's rule).
func (r *ring) resize(now time.Time) {
	c := len(r.buf)
	switch {
	case c < r.max && now.Sub(r.timeAt(0)) < r.fresh:
		r.realloc(min(2*c, r.max))
	case c > r.min && now.Sub(r.timeAt(r.n-c/4)) > r.fresh:
		r.realloc(max(c/2, r.min))
	}
}

// realloc copies the newest min(n, size) events into buffers of size; the events it drops
// are older than the ones it keeps, so start moves to the newest dropped one's revision.
func (r *ring) realloc(size int) {
	keep := min(r.n, size)
	if drop := r.n - keep; drop > 0 {
		r.start = r.at(drop - 1).Revision
	}
	buf, times := make([]*Event, size), make([]time.Time, size)
	for i := range keep {
		j := (r.head + r.n - keep + i) % len(r.buf)
		buf[i], times[i] = r.buf[j], r.times[j]
	}
	r.buf, r.times, r.head, r.n = buf, times, 0, keep
}

func (r *ring) at(i int) *Event { return r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) timeAt(i int) time.Time { return r.times[(r.head+i)%len(r.buf)] }

// since returns the events after rev, oldest first; ok is false when some of them were
// evicted (rev is older than r.start).
func (r *ring) since(rev int64) (evs []*Event, ok bool) {
	if rev < r.start {
		return nil, false
	}
	i := sort.Search(r.n, func(i int) bool { return r.at(i).Revision > rev })
	if i == r.n {
		return nil, true
	}
	evs = make([]*Event, 0, r.n-i)
	for ; i < r.n; i++ {
		evs = append(evs, r.at(i))
	}
	return evs, true
}

// reset forgets every event: only revisions >= start can be resumed from.
func (r *ring) reset(start int64) {
	clear(r.buf)
	r.head, r.n, r.start = 0, 0, start
}
