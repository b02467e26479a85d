package eventbus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Redis is the Redis Streams backend. See the package documentation for its guarantees.
type Redis struct {
	opts   Options
	m      *metrics
	run    runner
	client *redis.Client

	mu     sync.Mutex
	outbox []outboxEntry // FIFO, at most opts.BufferSize
	notify chan struct{}
	queues map[string]prometheus.Gauge

	health atomic.Pointer[healthState]
}

type outboxEntry struct {
	topic string
	e     Event
}

type healthState struct {
	err   error
	since time.Time
}

var _ Bus = (*Redis)(nil)

// NewRedis builds a Redis Streams bus. It does not connect until Start.
func NewRedis(opts Options) (*Redis, error) {
	opts.Backend = BackendRedis
	opts.Complete()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, BackendRedis, opts.Types, opts.Topics)
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{
		Addr:        opts.RedisAddr,
		Password:    opts.RedisPassword,
		DB:          opts.RedisDB,
		DialTimeout: time.Second,
		MaxRetries:  1,
	})
	b := &Redis{opts: opts, m: m, run: newRunner(), client: client,
		notify: make(chan struct{}, 1), queues: map[string]prometheus.Gauge{}}
	b.health.Store(&healthState{})
	return b, nil
}

// Publish puts e in the outbox that Start's flusher writes to the topic's stream. It never
// blocks; when the outbox is full (Redis unreachable for long) it returns ErrBufferFull.
func (b *Redis) Publish(ctx context.Context, topic string, e Event) error {
	if err := prepare(topic, &e, b.opts.Now); err != nil {
		return err
	}
	b.mu.Lock()
	if len(b.outbox) >= b.opts.BufferSize {
		b.mu.Unlock()
		b.m.events.WithLabelValues(e.Type, StatusDropped).Inc()
		return fmt.Errorf("topic %q: redis outbox holds %d events: %w", topic, b.opts.BufferSize, ErrBufferFull)
	}
	b.outbox = append(b.outbox, outboxEntry{topic, e})
	b.queueGauge(topic).Inc()
	b.mu.Unlock()
	if b.Healthy() != nil {
		b.m.events.WithLabelValues(e.Type, StatusBuffered).Inc()
	}
	select {
	case b.notify <- struct{}{}:
	default:
	}
	return nil
}

// queueGauge is called with b.mu held.
func (b *Redis) queueGauge(topic string) prometheus.Gauge {
	g, ok := b.queues[topic]
	if !ok {
		g = b.m.queue.WithLabelValues(topic)
		b.queues[topic] = g
	}
	return g
}

// Subscribe joins consumer group s.Group on the topic's stream as consumer s.Consumer.
// A new group reads the stream from its start (what trimming kept).
func (b *Redis) Subscribe(s Subscription) error {
	if err := checkSubscription(&s); err != nil {
		return err
	}
	if s.Consumer == "" {
		s.Consumer = b.opts.Consumer + "-" + s.Group
	}
	b.run.add(func(ctx context.Context) { b.consume(ctx, s) })
	return nil
}

// Start runs the outbox flusher and the subscriptions until ctx ends, then closes the client.
func (b *Redis) Start(ctx context.Context) error {
	b.run.add(b.flush)
	err := b.run.run(ctx)
	if cerr := b.client.Close(); err == nil && cerr != nil && !errors.Is(cerr, redis.ErrClosed) {
		err = cerr
	}
	return err
}

// Healthy returns nil while Redis answers, else an error wrapping ErrUnavailable with the
// last failure and how long it has lasted.
func (b *Redis) Healthy() error {
	h := b.health.Load()
	if h.err == nil {
		return nil
	}
	return fmt.Errorf("%w: redis %s unreachable since %s: %v", ErrUnavailable, b.opts.RedisAddr,
		h.since.Format(time.RFC3339), h.err)
}

// Buffered is the number of events in the outbox.
func (b *Redis) Buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.outbox)
}

func (b *Redis) fail(err error) {
	if h := b.health.Load(); h.err == nil {
		b.health.Store(&healthState{err: err, since: time.Now()})
	} else {
		b.health.Store(&healthState{err: err, since: h.since})
	}
	b.m.up.Set(0)
}

func (b *Redis) ok() {
	if b.health.Load().err != nil {
		b.health.Store(&healthState{})
	}
	b.m.up.Set(1)
}

// flush writes the outbox to Redis in order, in pipelined batches, retrying with backoff while
// Redis is unreachable. Entries leave the outbox only once Redis accepted them.
func (b *Redis) flush(ctx context.Context) {
	backoff := b.opts.RetryBackoff
	idle := time.NewTicker(time.Second)
	defer idle.Stop()
	for {
		b.mu.Lock()
		n := min(len(b.outbox), b.opts.Batch)
		batch := b.outbox[:n:n]
		b.mu.Unlock()
		if n == 0 {
			select {
			case <-ctx.Done():
				return
			case <-b.notify:
			case <-idle.C:
				if err := b.client.Ping(ctx).Err(); err != nil {
					b.fail(err)
				} else {
					b.ok()
				}
			}
			continue
		}
		cmds, _ := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range batch {
				p.XAdd(ctx, &redis.XAddArgs{
					Stream: b.opts.StreamPrefix + o.topic,
					MaxLen: b.opts.MaxLen,
					Approx: true,
					Values: encode(o.e),
				})
			}
			return nil
		})
		done := 0
		var err error
		for _, c := range cmds {
			if err = c.Err(); err != nil {
				break
			}
			done++
		}
		if done > 0 {
			b.mu.Lock()
			for _, o := range b.outbox[:done] {
				b.queues[o.topic].Dec()
				b.m.events.WithLabelValues(o.e.Type, StatusPublished).Inc()
			}
			b.outbox = b.outbox[done:]
			b.mu.Unlock()
		}
		if err == nil && done < n {
			err = errors.New("pipeline returned fewer replies than commands")
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.fail(err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, b.opts.RetryBackoffMax)
			continue
		}
		backoff = b.opts.RetryBackoff
		b.ok()
	}
}

// consume reads one subscription: first its own pending entries (a restart resumes where it
// stopped), then new entries, reclaiming entries other consumers left pending too long.
func (b *Redis) consume(ctx context.Context, s Subscription) {
	stream := b.opts.StreamPrefix + s.Topic
	backoff := b.opts.RetryBackoff
	needGroup := true
	ownPending := "0" // cursor through this consumer's pending entries; "" once done
	var lastClaim time.Time
	retry := func(err error) bool {
		if ctx.Err() != nil {
			return false
		}
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			needGroup = true // Redis lost the group (restarted without persistence)
		}
		b.fail(err)
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, b.opts.RetryBackoffMax)
		return true
	}
	for ctx.Err() == nil {
		if needGroup {
			err := b.client.XGroupCreateMkStream(ctx, stream, s.Group, "0").Err()
			if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				if !retry(err) {
					return
				}
				continue
			}
			needGroup = false
		}
		if time.Since(lastClaim) >= b.opts.ClaimInterval {
			msgs, _, err := b.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: stream, Group: s.Group, Consumer: s.Consumer,
				MinIdle: b.opts.ClaimMinIdle, Start: "0-0", Count: int64(b.opts.Batch),
			}).Result()
			if err != nil {
				if !retry(err) {
					return
				}
				continue
			}
			lastClaim = time.Now()
			b.process(ctx, stream, s, msgs)
		}
		id, block := ">", b.opts.ReadBlock
		if ownPending != "" {
			id, block = ownPending, -1
		}
		res, err := b.client.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: s.Group, Consumer: s.Consumer, Streams: []string{stream, id},
			Count: int64(b.opts.Batch), Block: block,
		}).Result()
		if errors.Is(err, redis.Nil) {
			b.ok()
			continue
		}
		if err != nil {
			if !retry(err) {
				return
			}
			continue
		}
		backoff = b.opts.RetryBackoff
		b.ok()
		var msgs []redis.XMessage
		if len(res) > 0 {
			msgs = res[0].Messages
		}
		if ownPending != "" {
			if len(msgs) == 0 {
				ownPending = ""
				continue
			}
			ownPending = msgs[len(msgs)-1].ID
		}
		b.process(ctx, stream, s, msgs)
	}
}

// process hands each message to the handler and acknowledges those it accepted. Entries
// that no longer exist (trimmed) or cannot be decoded are acknowledged so they stop coming back.
func (b *Redis) process(ctx context.Context, stream string, s Subscription, msgs []redis.XMessage) {
	ack := make([]string, 0, len(msgs))
	for _, msg := range msgs {
		if msg.Values == nil {
			ack = append(ack, msg.ID)
			continue
		}
		e, err := decode(msg.Values)
		if err != nil {
			b.m.events.WithLabelValues("invalid", StatusFailed).Inc()
			ack = append(ack, msg.ID)
			continue
		}
		if handle(ctx, b.m, s.Handler, e) == nil {
			ack = append(ack, msg.ID)
		}
	}
	if len(ack) > 0 {
		// An acknowledgement lost here only means a redelivery (at-least-once).
		if err := b.client.XAck(ctx, stream, s.Group, ack...).Err(); err != nil && ctx.Err() == nil {
			b.fail(err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func encode(e Event) []any {
	return []any{
		"trace_id", e.TraceID, "event_type", e.Type, "kind", e.Kind, "namespace", e.Namespace,
		"name", e.Name, "uid", e.UID, "from", e.From, "to", e.To, "reason", e.Reason,
		"time", e.Time.UTC().Format(time.RFC3339Nano),
	}
}

func decode(v map[string]any) (Event, error) {
	s := func(k string) string { x, _ := v[k].(string); return x }
	e := Event{TraceID: s("trace_id"), Type: s("event_type"), Kind: s("kind"), Namespace: s("namespace"),
		Name: s("name"), UID: s("uid"), From: s("from"), To: s("to"), Reason: s("reason")}
	if e.Type == "" {
		return e, fmt.Errorf("%w: stream entry without event_type", ErrInvalidEvent)
	}
	if t := s("time"); t != "" {
		var err error
		if e.Time, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return e, fmt.Errorf("%w: time %q: %v", ErrInvalidEvent, t, err)
		}
	}
	return e, nil
}
