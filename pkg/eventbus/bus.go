package eventbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Event is one thing that happened to one object.
type Event struct {
	// TraceID ties the event to the request or reconcile that caused it (32 hex digits, W3C
	// trace-context style). Publish fills in a random one when empty.
	TraceID string `json:"trace_id"`
	// Type is the event type in lower_snake_case, e.g. credential_rotated.
	Type      string `json:"event_type"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	UID       string `json:"uid,omitempty"`
	// From and To are the lifecycle phases before and after, when the event is a transition.
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Time is when it happened; Publish fills in the bus clock when zero.
	Time time.Time `json:"time"`
}

// Handler processes one event. For the Redis backend a nil return acknowledges the event; an
// error leaves it pending for redelivery.
type Handler func(ctx context.Context, e Event) error

// Subscription asks for the events of one topic.
type Subscription struct {
	// Topic to read; required.
	Topic string
	// Group shares the topic's events among its members: each event goes to one member of each
	// group (a Redis consumer group). Empty means "default".
	Group string
	// Consumer names this member inside its group (Redis: the consumer name, which is how a
	// restarted consumer finds its pending entries). Empty means a name derived from the
	// bus's Options.Consumer.
	Consumer string
	// Handler is called for every event; required.
	Handler Handler
}

// Publisher is what event producers need.
type Publisher interface {
	Publish(ctx context.Context, topic string, e Event) error
}

// Bus is a backend: publish, subscribe, run, report health.
type Bus interface {
	Publisher
	// Subscribe registers a subscription; it starts receiving once Start runs.
	Subscribe(s Subscription) error
	// Start runs the backend until ctx ends and returns after its goroutines have stopped.
	Start(ctx context.Context) error
	// Healthy returns nil when the backend can deliver, else an error wrapping ErrUnavailable.
	Healthy() error
}

var (
	// ErrBufferFull is returned by Publish when an event could not be accepted because a
	// bounded buffer is full; the event is counted as dropped.
	ErrBufferFull = errors.New("eventbus: buffer full, event dropped")
	// ErrInvalidEvent is returned by Publish and Subscribe for malformed input.
	ErrInvalidEvent = errors.New("eventbus: invalid event")
	// ErrUnavailable is wrapped by Healthy when the backend cannot reach its store.
	ErrUnavailable = errors.New("eventbus: backend unavailable")
)

// Event statuses, the values of the status label of eventbus_events_total.
const (
	StatusPublished = "published" // accepted for delivery (memory: into buffers; redis: XADDed)
	StatusProcessed = "processed" // a handler returned nil
	StatusFailed    = "failed"    // a handler returned an error, or the event could not be decoded
	StatusDropped   = "dropped"   // lost: a bounded buffer stayed full
	StatusBuffered  = "buffered"  // held in the outbox because Redis was unreachable
)

var statuses = []string{StatusPublished, StatusProcessed, StatusFailed, StatusDropped, StatusBuffered}

// Backend names for Options.Backend.
const (
	BackendMemory = "memory"
	BackendRedis  = "redis"
)

// Options configure a bus. Zero values take the defaults set in Complete.
type Options struct {
	// Backend is "memory" (default) or "redis".
	Backend string
	// RedisAddr is host:port of the Redis server (Backend "redis").
	RedisAddr string
	// RedisPassword and RedisDB select the Redis database.
	RedisPassword string
	RedisDB       int
	// StreamPrefix prefixes each topic's stream key (default "kube:events:").
	StreamPrefix string
	// MaxLen trims each stream to about this many entries (XADD MAXLEN ~; default 100000).
	MaxLen int64
	// BufferSize bounds each memory subscription group's buffer and the Redis outbox
	// (default 10000).
	BufferSize int
	// PublishTimeout is how long a memory Publish waits for room in a full buffer before it
	// drops the event (default 100ms).
	PublishTimeout time.Duration
	// Consumer is this process's consumer name prefix (default "kube-" + random).
	Consumer string
	// ClaimMinIdle is how long a Redis entry must be pending before another consumer reclaims
	// it (default 30s); ClaimInterval is how often reclaim runs (default ClaimMinIdle/2).
	ClaimMinIdle  time.Duration
	ClaimInterval time.Duration
	// ReadBlock is how long XREADGROUP blocks (default 1s); Batch is the read and write batch
	// size (default 256).
	ReadBlock time.Duration
	Batch     int
	// RetryBackoff is the first delay between attempts while Redis is unreachable, doubled up
	// to RetryBackoffMax (defaults 50ms and 2s).
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// Registerer receives the metrics; nil means they are not registered.
	Registerer prometheus.Registerer
	// Types and Topics pre-initialise the metrics' label sets.
	Types  []string
	Topics []string
	// Now is the clock for Event.Time (default time.Now).
	Now func() time.Time
}

// Complete fills in the defaults.
func (o *Options) Complete() {
	if o.Backend == "" {
		o.Backend = BackendMemory
	}
	if o.StreamPrefix == "" {
		o.StreamPrefix = "kube:events:"
	}
	if o.MaxLen == 0 {
		o.MaxLen = 100000
	}
	if o.BufferSize == 0 {
		o.BufferSize = 10000
	}
	if o.PublishTimeout == 0 {
		o.PublishTimeout = 100 * time.Millisecond
	}
	if o.Consumer == "" {
		o.Consumer = "kube-" + randomHex(4)
	}
	if o.ClaimMinIdle == 0 {
		o.ClaimMinIdle = 30 * time.Second
	}
	if o.ClaimInterval == 0 {
		o.ClaimInterval = o.ClaimMinIdle / 2
	}
	if o.ReadBlock == 0 {
		o.ReadBlock = time.Second
	}
	if o.Batch == 0 {
		o.Batch = 256
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	if o.RetryBackoffMax == 0 {
		o.RetryBackoffMax = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	switch o.Backend {
	case BackendMemory:
	case BackendRedis:
		if o.RedisAddr == "" {
			return fmt.Errorf("eventbus: backend redis needs a Redis address")
		}
	default:
		return fmt.Errorf("eventbus: unknown backend %q (want %q or %q)", o.Backend, BackendMemory, BackendRedis)
	}
	if o.BufferSize < 0 || o.Batch < 0 || o.MaxLen < 0 {
		return fmt.Errorf("eventbus: BufferSize, Batch and MaxLen must not be negative")
	}
	for _, t := range o.Types {
		if !typePattern.MatchString(t) {
			return fmt.Errorf("eventbus: event type %q is not lower_snake_case", t)
		}
	}
	return nil
}

// New builds the backend named by opts.Backend.
func New(opts Options) (Bus, error) {
	opts.Complete()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Backend == BackendRedis {
		return NewRedis(opts)
	}
	return NewMemory(opts)
}

var typePattern = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// prepare validates e and fills in its trace id and time.
func prepare(topic string, e *Event, now func() time.Time) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalidEvent)
	}
	if !typePattern.MatchString(e.Type) {
		return fmt.Errorf("%w: type %q is not lower_snake_case", ErrInvalidEvent, e.Type)
	}
	if e.TraceID == "" {
		e.TraceID = NewTraceID()
	}
	if e.Time.IsZero() {
		e.Time = now()
	}
	return nil
}

func checkSubscription(s *Subscription) error {
	if s.Topic == "" || s.Handler == nil {
		return fmt.Errorf("%w: a subscription needs a topic and a handler", ErrInvalidEvent)
	}
	if s.Group == "" {
		s.Group = "default"
	}
	return nil
}

// NewTraceID returns a random 16-byte trace id in hex.
func NewTraceID() string { return randomHex(16) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
