package pods

import "time"

// Back-off of restarts and image pulls: upstream's 10 s doubling to 300 s, reset after a
// container ran 10 minutes.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 300 * time.Second
	backoffReset   = 10 * time.Minute
)

// backoff is one container's restart (or pull) back-off.
type backoff struct {
	delay time.Duration
	since time.Time
}

// blocked reports whether a retry at now must still wait after the failure at last.
// Pure.
func (b *backoff) blocked(last, now time.Time) bool {
	return b != nil && b.delay > 0 && now.Before(last.Add(b.delay))
}

// next records a retry at now and returns the new back-off. ran is how long the failed
// attempt ran (0 for pulls). Pure.
func (b *backoff) next(now time.Time, ran time.Duration) *backoff {
	if b == nil || ran >= backoffReset {
		return &backoff{delay: backoffInitial, since: now}
	}
	return &backoff{delay: min(2*b.delay, backoffMax), since: now}
}
