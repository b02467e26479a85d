package watchcache

import "sort"

// ring keeps the most recent events in revision order. It holds every event after start:
// a watch may resume from any revision >= start.
type ring struct {
	buf   []*Event
	head  int // index of the oldest event
	n     int
	start int64
}

func newRing(size int, start int64) *ring {
	return &ring{buf: make([]*Event, size), start: start}
}

// push appends ev, evicting the oldest event when full.
func (r *ring) push(ev *Event) {
	if r.n == len(r.buf) {
		old := r.buf[r.head]
		r.buf[r.head] = ev
		r.head = (r.head + 1) % len(r.buf)
		// Every event after old's revision is still held (events of one revision are
		// consecutive, and the later ones of old's revision do not matter to a watch that
		// resumes from it).
		r.start = old.Revision
		return
	}
	r.buf[(r.head+r.n)%len(r.buf)] = ev
	r.n++
}

func (r *ring) at(i int) *Event { return r.buf[(r.head+i)%len(r.buf)] }

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
