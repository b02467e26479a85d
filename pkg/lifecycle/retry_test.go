package lifecycle

import (
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// fakeClock is an injected clock a test moves by hand.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time       { return c.now }
func (c *fakeClock) Step(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *fakeClock                { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: nsName(ns, name)}
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "kubeos.dev", Resource: "tenants"}
	for _, tc := range []struct {
		err  error
		want ErrorClass
	}{
		{nil, ClassNone},
		{errors.New("connection refused"), ClassTransient},
		{apierrors.NewConflict(gr, "a", errors.New("stale")), ClassConflict},
		{fmt.Errorf("update status: %w", apierrors.NewConflict(gr, "a", errors.New("stale"))), ClassConflict},
		{apierrors.NewTooManyRequests("slow down", 1), ClassThrottled},
		{apierrors.NewServerTimeout(gr, "get", 1), ClassThrottled},
		{apierrors.NewInvalid(schema.GroupKind{Group: "kubeos.dev", Kind: "Tenant"}, "a", field.ErrorList{field.Invalid(field.NewPath("spec"), 1, "bad")}), ClassPermanent},
		{reconcile.TerminalError(errors.New("no such issuer")), ClassPermanent},
		{fmt.Errorf("provision: %w", reconcile.TerminalError(errors.New("x"))), ClassPermanent},
		{apierrors.NewNotFound(gr, "a"), ClassTransient},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestStrategies(t *testing.T) {
	a, b := req("ns", "a"), req("ns", "b")
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		s     Strategy[reconcile.Request]
		items []reconcile.Request
		want  []time.Duration
		// exhaustedAfter: Exhausted(items[0]) after all calls
		exhausted bool
	}{
		{"immediate", &Immediate[reconcile.Request]{MaxRetries: 3}, []reconcile.Request{a, a, a}, []time.Duration{0, 0, 0}, true},
		{"immediate unbounded", &Immediate[reconcile.Request]{}, []reconcile.Request{a, a, a, a}, []time.Duration{0, 0, 0, 0}, false},
		{"exponential", &ExponentialBackoff[reconcile.Request]{Base: 10 * ms, Cap: 100 * ms},
			[]reconcile.Request{a, a, b, a, a, a, b}, []time.Duration{10 * ms, 20 * ms, 10 * ms, 40 * ms, 80 * ms, 100 * ms, 20 * ms}, false},
		{"exponential with jitter", &ExponentialBackoff[reconcile.Request]{Base: 100 * ms, Cap: time.Second, Jitter: 0.5, Rand: func() float64 { return 0.5 }, MaxRetries: 2},
			[]reconcile.Request{a, a}, []time.Duration{75 * ms, 150 * ms}, true},
		{"exponential does not overflow", &ExponentialBackoff[reconcile.Request]{Base: time.Second, Cap: time.Hour},
			repeat(a, 80), append(powers(time.Second, 12), repeatD(time.Hour, 68)...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, it := range tc.items {
				if got := tc.s.When(it); got != tc.want[i] {
					t.Fatalf("call %d (%v): When = %s, want %s", i, it.Name, got, tc.want[i])
				}
			}
			if got := tc.s.Exhausted(tc.items[0]); got != tc.exhausted {
				t.Fatalf("Exhausted = %v, want %v", got, tc.exhausted)
			}
			tc.s.Forget(tc.items[0])
			if tc.s.NumRequeues(tc.items[0]) != 0 || tc.s.Exhausted(tc.items[0]) {
				t.Fatalf("Forget did not reset")
			}
		})
	}
}

func repeat(r reconcile.Request, n int) []reconcile.Request {
	out := make([]reconcile.Request, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func repeatD(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func powers(base time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = base << i
	}
	return out
}

func TestRateLimitedPerTenant(t *testing.T) {
	clock := newClock()
	s := &RateLimited[reconcile.Request]{QPS: 10, Burst: 2, Now: clock.Now,
		TenantOf: func(r reconcile.Request) string { return r.Namespace }}
	var _ workqueue.TypedRateLimiter[reconcile.Request] = s
	noisy, quiet := req("tenant-a", "x"), req("tenant-b", "y")
	ms := time.Millisecond
	for i, want := range []time.Duration{0, 0, 100 * ms, 200 * ms, 300 * ms} {
		if got := s.When(noisy); got != want {
			t.Fatalf("noisy call %d: %s, want %s", i, got, want)
		}
	}
	if got := s.When(quiet); got != 0 {
		t.Fatalf("the quiet tenant waits %s behind the noisy one", got)
	}
	clock.Step(time.Second) // refills 10 tokens, capped at the burst; the debt of 3 is paid
	for i, want := range []time.Duration{0, 0, 100 * ms} {
		if got := s.When(noisy); got != want {
			t.Fatalf("after refill, call %d: %s, want %s", i, got, want)
		}
	}
	shared := &RateLimited[reconcile.Request]{QPS: 1, Burst: 1, Now: clock.Now}
	shared.When(noisy)
	if got := shared.When(quiet); got != time.Second {
		t.Fatalf("one shared bucket: second item waits %s, want 1s", got)
	}
}

func TestPolicyByErrorClass(t *testing.T) {
	p := DefaultPolicy[reconcile.Request](nil)
	a := req("ns", "a")
	gr := schema.GroupResource{Resource: "things"}
	conflict := apierrors.NewConflict(gr, "a", errors.New("stale"))
	for i := 0; i < 5; i++ {
		if r := p.Next(a, conflict); r.GiveUp || r.After != 0 {
			t.Fatalf("conflict retry %d: %+v, want immediate", i, r)
		}
	}
	if r := p.Next(a, conflict); !r.GiveUp {
		t.Fatalf("sixth conflict: %+v, want give up", r)
	}
	if r := p.Next(a, errors.New("dial tcp: refused")); r.GiveUp || r.After != 5*time.Millisecond {
		t.Fatalf("transient: %+v, want 5ms", r)
	}
	if r := p.Next(a, apierrors.NewTooManyRequests("later", 1)); r.After != time.Second {
		t.Fatalf("throttled: %+v, want 1s", r)
	}
	if r := p.Next(a, reconcile.TerminalError(errors.New("bad spec"))); !r.GiveUp {
		t.Fatalf("terminal: %+v, want give up", r)
	}
	if p.NumRequeues(a) != 5 {
		t.Fatalf("NumRequeues = %d, want 5 (the conflict retries)", p.NumRequeues(a))
	}
	p.Forget(a)
	if p.NumRequeues(a) != 0 {
		t.Fatalf("Forget did not reach every strategy")
	}
}

func TestThrashGuardDefersNeverDrops(t *testing.T) {
	clock := newClock()
	g := &ThrashGuard[reconcile.Request]{Max: 3, Window: 10 * time.Second, Defer: time.Minute, Now: clock.Now}
	a, b := req("ns", "a"), req("ns", "b")
	for i, want := range []time.Duration{0, 0, 0, time.Minute, time.Minute} {
		if got := g.Observe(a); got != want {
			t.Fatalf("reconcile %d within the window: defer %s, want %s", i+1, got, want)
		}
		clock.Step(time.Second)
	}
	if g.Observe(b) != 0 {
		t.Fatalf("another object is deferred")
	}
	clock.Step(10 * time.Second) // the window slides past the storm
	if got := g.Observe(a); got != 0 {
		t.Fatalf("after the window: defer %s", got)
	}
	l := g.Limiter(&Immediate[reconcile.Request]{})
	for i := 0; i < 3; i++ {
		l.When(a)
	}
	if got := l.When(a); got != time.Minute {
		t.Fatalf("wrapped limiter: %s, want the thrash deferral", got)
	}
}
