package nats

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamSpec is what a Topic asks of its stream.
type StreamSpec struct {
	Name     string
	Subjects []string
	// Retention is Limits (default), Interest or WorkQueue.
	Retention string
	// MaxAge 0 and MaxBytes 0 mean unlimited.
	MaxAge   time.Duration
	MaxBytes int64
	// Replicas is 1 unless set.
	Replicas int
	// Storage is File (default) or Memory.
	Storage     string
	Description string
}

// StreamConfig is the JetStream configuration of a spec; it refuses a retention or storage
// it does not know.
func StreamConfig(s StreamSpec) (jetstream.StreamConfig, error) {
	c := jetstream.StreamConfig{
		Name: s.Name, Description: s.Description, Subjects: append([]string(nil), s.Subjects...),
		MaxAge: s.MaxAge, MaxBytes: -1, Replicas: s.Replicas, MaxMsgs: -1, MaxConsumers: -1,
		Discard: jetstream.DiscardOld,
	}
	if s.MaxBytes > 0 {
		c.MaxBytes = s.MaxBytes
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 0 {
		return c, fmt.Errorf("replicas %d: must be at least 1", s.Replicas)
	}
	switch strings.ToLower(s.Retention) {
	case "", "limits":
		c.Retention = jetstream.LimitsPolicy
	case "interest":
		c.Retention = jetstream.InterestPolicy
	case "workqueue":
		c.Retention = jetstream.WorkQueuePolicy
	default:
		return c, fmt.Errorf("retention %q: must be Limits, Interest or WorkQueue", s.Retention)
	}
	switch strings.ToLower(s.Storage) {
	case "", "file":
		c.Storage = jetstream.FileStorage
	case "memory":
		c.Storage = jetstream.MemoryStorage
	default:
		return c, fmt.Errorf("storage %q: must be File or Memory", s.Storage)
	}
	if len(c.Subjects) == 0 {
		return c, fmt.Errorf("stream %s: no subjects", s.Name)
	}
	return c, nil
}

// StreamName is the stream of a Topic: namespace and name joined by "_", with the dots that a
// name may hold turned to "_" (stream names may not hold dots; neither a namespace nor a name
// holds "_", so the result is unique).
func StreamName(namespace, name string) string {
	return namespace + "_" + strings.ReplaceAll(name, ".", "_")
}

// InboxPrefix is the reply-subject prefix a Topic's user must set on its connection
// (nats.go: nats.CustomInboxPrefix): the user may subscribe there and nowhere else but its
// subjects, so that no user reads another's replies.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// UserPermissions are what a Topic's user may publish and subscribe to: its subjects, its
// inbox, and the JetStream API of its own stream (info, consumers, pulls, acks) — nothing of
// another stream or of the server's account.
func UserPermissions(user, stream string, subjects []string) (publish, subscribe []string) {
	publish = append(publish, subjects...)
	publish = append(publish,
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO."+stream,
		"$JS.API.STREAM.MSG.GET."+stream,
		"$JS.API.DIRECT.GET."+stream,
		"$JS.API.DIRECT.GET."+stream+".>",
		"$JS.API.CONSUMER.CREATE."+stream,
		"$JS.API.CONSUMER.CREATE."+stream+".>",
		"$JS.API.CONSUMER.DURABLE.CREATE."+stream+".>",
		"$JS.API.CONSUMER.INFO."+stream+".>",
		"$JS.API.CONSUMER.DELETE."+stream+".>",
		"$JS.API.CONSUMER.NAMES."+stream,
		"$JS.API.CONSUMER.LIST."+stream,
		"$JS.API.CONSUMER.MSG.NEXT."+stream+".>",
		"$JS.ACK."+stream+".>",
		"$JS.FC."+stream+".>",
	)
	subscribe = append(subscribe, subjects...)
	subscribe = append(subscribe, InboxPrefix(user)+".>")
	return publish, subscribe
}
