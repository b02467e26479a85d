// Package eventbus carries lifecycle events — phase transitions and reconcile outcomes — from
// the engine (or any operator) to whoever subscribes, by topic.
//
// An [Event] has a trace id, a lower_snake_case type (credential_rotated, phase_changed), the
// object it is about (kind, namespace, name, uid), the phases it moved between and a reason.
//
// Two backends implement [Bus]:
//
//   - [Memory] (the default): in-process fan-out. Every subscription group of a topic has a
//     bounded buffer (Options.BufferSize). Publish never blocks indefinitely: when a group's
//     buffer is full it waits at most Options.PublishTimeout for room, then drops the event for
//     that group, counts it as eventbus_events_total{status="dropped"} and returns
//     [ErrBufferFull]. Handler errors are counted (status="failed"); the event is not redelivered.
//
//   - [Redis]: one Redis stream per topic (XADD with MAXLEN ~ trimming), consumer groups
//     (XREADGROUP), acknowledgement after the handler succeeds (XACK), so delivery is
//     at-least-once: an event whose handler failed or whose consumer died stays pending and is
//     reclaimed (XAUTOCLAIM) once idle for Options.ClaimMinIdle; a consumer restarted under
//     the same name first re-reads its own pending entries. Publish hands the event to a
//     bounded in-memory outbox (Options.BufferSize) that a flusher writes to Redis in pipelined
//     batches; while Redis is unreachable the outbox holds events (in order), [Redis.Healthy]
//     reports the error (wire it to /readyz) and kube_eventbus_backend_up is 0. When Redis
//     returns, everything in the outbox is written; only events beyond the bound are refused
//     (ErrBufferFull, status="dropped"). The outbox lives in process memory: a crash loses it.
//
// Every backend has one lifecycle: construct it, Subscribe (before or after starting), and run
// Start(ctx), which blocks until ctx ends and stops every goroutine it started.
//
//	bus, err := eventbus.New(eventbus.Options{Registerer: reg, Types: []string{"phase_changed"}})
//	_ = bus.Subscribe(eventbus.Subscription{Topic: "lifecycle", Group: "audit",
//		Handler: func(ctx context.Context, e eventbus.Event) error { ...; return nil }})
//	go bus.Start(ctx)
//	_ = bus.Publish(ctx, "lifecycle", eventbus.Event{Type: "phase_changed", Kind: "Tenant", ...})
//
// Metrics (through the injected prometheus.Registerer, pre-initialised for Options.Types and
// Options.Topics): eventbus_events_total{type,status} with status one of published, processed,
// failed, dropped, buffered; eventbus_processing_seconds{type} (handler duration);
// eventbus_queue_length{topic} (events held in this process: subscriber buffers in memory,
// the outbox for Redis); kube_eventbus_backend_up{backend}.
package eventbus
