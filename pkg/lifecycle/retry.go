package lifecycle

import (
	"errors"
	"math"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ErrorClass groups reconcile errors by how they should be retried.
type ErrorClass string

// The error classes Classify returns.
const (
	ClassNone      ErrorClass = ""          // no error
	ClassTransient ErrorClass = "transient" // anything not known to be otherwise
	ClassConflict  ErrorClass = "conflict"  // 409: a stale resourceVersion; retry at once
	ClassThrottled ErrorClass = "throttled" // 429, server timeouts: the server asks for patience
	ClassPermanent ErrorClass = "permanent" // terminal errors, 400/422: retrying cannot help
)

// Classify sorts err into an ErrorClass. reconcile.TerminalError and invalid-input API errors
// are permanent.
func Classify(err error) ErrorClass {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, reconcile.TerminalError(nil)):
		return ClassPermanent
	case apierrors.IsConflict(err):
		return ClassConflict
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return ClassThrottled
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return ClassPermanent
	default:
		return ClassTransient
	}
}

// Strategy is a retry strategy: a workqueue rate limiter that may also give up.
type Strategy[T comparable] interface {
	workqueue.TypedRateLimiter[T]
	// Exhausted reports whether item has used up its retries; the engine then marks the
	// object Stalled instead of requeueing it (a new generation starts it over).
	Exhausted(item T) bool
}

// failures counts retries per item.
type failures[T comparable] struct {
	mu sync.Mutex
	n  map[T]int
}

func (f *failures[T]) next(item T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[T]int{}
	}
	n := f.n[item]
	f.n[item] = n + 1
	return n
}

// NumRequeues is how many times item was retried since it was last forgotten.
func (f *failures[T]) NumRequeues(item T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[item]
}

// Forget resets item's count.
func (f *failures[T]) Forget(item T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.n, item)
}

func exhausted(n, max int) bool { return max > 0 && n >= max }

// Immediate retries at once, at most MaxRetries times (0: without bound).
type Immediate[T comparable] struct {
	MaxRetries int
	failures[T]
}

var _ Strategy[reconcile.Request] = (*Immediate[reconcile.Request])(nil)

// When is always 0.
func (s *Immediate[T]) When(item T) time.Duration { s.next(item); return 0 }

// Exhausted reports whether MaxRetries retries were made.
func (s *Immediate[T]) Exhausted(item T) bool { return exhausted(s.NumRequeues(item), s.MaxRetries) }

// ExponentialBackoff waits Base·2ⁿ before the n-th retry, at most Cap, less a random part of
// up to Jitter (0…1) of it so that objects failing together spread out.
type ExponentialBackoff[T comparable] struct {
	Base, Cap  time.Duration
	Jitter     float64
	MaxRetries int // 0: without bound
	// Rand returns a number in [0, 1); nil means no jitter is applied (deterministic).
	Rand func() float64
	failures[T]
}

var _ Strategy[reconcile.Request] = (*ExponentialBackoff[reconcile.Request])(nil)

// When returns the delay before item's next retry.
func (s *ExponentialBackoff[T]) When(item T) time.Duration {
	n := s.next(item)
	d := float64(s.Base) * math.Pow(2, float64(n))
	if s.Cap > 0 && d > float64(s.Cap) {
		d = float64(s.Cap)
	}
	if d > math.MaxInt64 {
		d = math.MaxInt64
	}
	if s.Jitter > 0 && s.Rand != nil {
		d -= d * s.Jitter * s.Rand()
	}
	return time.Duration(d)
}

// Exhausted reports whether MaxRetries retries were made.
func (s *ExponentialBackoff[T]) Exhausted(item T) bool {
	return exhausted(s.NumRequeues(item), s.MaxRetries)
}

// RateLimited spaces retries with a token bucket (QPS tokens a second, up to Burst), one
// bucket for all items, or one per tenant when TenantOf is set, so that one noisy tenant
// cannot starve the others.
type RateLimited[T comparable] struct {
	QPS   float64
	Burst int
	// TenantOf names the bucket an item draws from; nil means one shared bucket.
	TenantOf func(T) string
	// Now is the clock (default time.Now).
	Now        func() time.Time
	MaxRetries int // 0: without bound
	failures[T]

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

var _ Strategy[reconcile.Request] = (*RateLimited[reconcile.Request])(nil)

// When takes a token from item's bucket and returns how long until that token exists.
func (s *RateLimited[T]) When(item T) time.Duration {
	s.next(item)
	key := ""
	if s.TenantOf != nil {
		key = s.TenantOf(item)
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets == nil {
		s.buckets = map[string]*bucket{}
	}
	b, ok := s.buckets[key]
	if !ok {
		b = &bucket{tokens: float64(s.Burst), last: now}
		s.buckets[key] = b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(float64(s.Burst), b.tokens+elapsed.Seconds()*s.QPS)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 || s.QPS <= 0 {
		return 0
	}
	return time.Duration(-b.tokens / s.QPS * float64(time.Second))
}

// Exhausted reports whether MaxRetries retries were made.
func (s *RateLimited[T]) Exhausted(item T) bool { return exhausted(s.NumRequeues(item), s.MaxRetries) }

// Policy picks a strategy by error class. As a workqueue rate limiter it uses Default.
type Policy[T comparable] struct {
	Default Strategy[T]
	ByClass map[ErrorClass]Strategy[T]
}

var _ workqueue.TypedRateLimiter[reconcile.Request] = (*Policy[reconcile.Request])(nil)

// DefaultPolicy: conflicts retry at once (a fresh read fixes them, 5 times), throttling backs
// off slowly (1 s … 5 min), everything else backs off from 5 ms to 5 min with 20 % jitter.
func DefaultPolicy[T comparable](rand func() float64) *Policy[T] {
	return &Policy[T]{
		Default: &ExponentialBackoff[T]{Base: 5 * time.Millisecond, Cap: 5 * time.Minute, Jitter: 0.2, Rand: rand},
		ByClass: map[ErrorClass]Strategy[T]{
			ClassConflict:  &Immediate[T]{MaxRetries: 5},
			ClassThrottled: &ExponentialBackoff[T]{Base: time.Second, Cap: 5 * time.Minute, Jitter: 0.2, Rand: rand},
		},
	}
}

// For returns the strategy for class.
func (p *Policy[T]) For(class ErrorClass) Strategy[T] {
	if s, ok := p.ByClass[class]; ok {
		return s
	}
	return p.Default
}

// Retry is what to do after a failed reconcile.
type Retry struct {
	// After is the delay before the retry.
	After time.Duration
	// GiveUp means do not requeue: the error is permanent or the retries are exhausted; the
	// object becomes Stalled until its spec changes.
	GiveUp bool
}

// Next decides the retry of item after err.
func (p *Policy[T]) Next(item T, err error) Retry {
	class := Classify(err)
	if class == ClassPermanent {
		return Retry{GiveUp: true}
	}
	s := p.For(class)
	if s.Exhausted(item) {
		return Retry{GiveUp: true}
	}
	return Retry{After: s.When(item)}
}

// When implements workqueue.TypedRateLimiter with the default strategy.
func (p *Policy[T]) When(item T) time.Duration { return p.Default.When(item) }

// NumRequeues is the largest count of any strategy.
func (p *Policy[T]) NumRequeues(item T) int {
	n := p.Default.NumRequeues(item)
	for _, s := range p.ByClass {
		n = max(n, s.NumRequeues(item))
	}
	return n
}

// Forget resets item in every strategy (after a successful reconcile).
func (p *Policy[T]) Forget(item T) {
	p.Default.Forget(item)
	for _, s := range p.ByClass {
		s.Forget(item)
	}
}

// ThrashGuard notices an object reconciled more than Max times within Window (a reconcile
// storm: two writers fighting, a status write that triggers itself) and defers it by Defer.
// It never drops the object: the reconcile still happens, later.
type ThrashGuard[T comparable] struct {
	Max    int
	Window time.Duration
	Defer  time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu   sync.Mutex
	seen map[T][]time.Time
}

// Observe records a reconcile of item and returns how long to defer it: 0 normally, Defer
// when it is thrashing.
func (g *ThrashGuard[T]) Observe(item T) time.Duration {
	now := time.Now()
	if g.Now != nil {
		now = g.Now()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[T][]time.Time{}
	}
	ts := g.seen[item]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= g.Window {
		i++
	}
	ts = append(ts[i:], now)
	if len(ts) > g.Max+1 {
		ts = ts[len(ts)-g.Max-1:]
	}
	g.seen[item] = ts
	if len(ts) > g.Max {
		return g.Defer
	}
	return 0
}

// Forget drops item's history (the object is gone).
func (g *ThrashGuard[T]) Forget(item T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.seen, item)
}

// Limiter wraps inner so that a thrashing item waits at least Defer.
func (g *ThrashGuard[T]) Limiter(inner workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimiter[T] {
	return &thrashLimiter[T]{inner: inner, g: g}
}

type thrashLimiter[T comparable] struct {
	inner workqueue.TypedRateLimiter[T]
	g     *ThrashGuard[T]
}

func (l *thrashLimiter[T]) When(item T) time.Duration {
	return max(l.inner.When(item), l.g.Observe(item))
}
func (l *thrashLimiter[T]) NumRequeues(item T) int { return l.inner.NumRequeues(item) }
func (l *thrashLimiter[T]) Forget(item T)          { l.inner.Forget(item) }
