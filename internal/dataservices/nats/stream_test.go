package nats

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestStreamConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    StreamSpec
		wantErr bool
		check   func(jetstream.StreamConfig) bool
	}{
		{"defaults", StreamSpec{Name: "a_b", Subjects: []string{"t.x"}}, false, func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.LimitsPolicy && c.Storage == jetstream.FileStorage && c.Replicas == 1 && c.MaxBytes == -1
		}},
		{"workqueue memory", StreamSpec{Name: "a_b", Subjects: []string{"t.x"}, Retention: "WorkQueue", Storage: "Memory", MaxAge: time.Hour, MaxBytes: 10}, false, func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.WorkQueuePolicy && c.Storage == jetstream.MemoryStorage && c.MaxAge == time.Hour && c.MaxBytes == 10
		}},
		{"interest", StreamSpec{Name: "a", Subjects: []string{"t.>"}, Retention: "Interest"}, false, func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.InterestPolicy
		}},
		{"bad retention", StreamSpec{Name: "a", Subjects: []string{"t"}, Retention: "Forever"}, true, nil},
		{"bad storage", StreamSpec{Name: "a", Subjects: []string{"t"}, Storage: "Disk"}, true, nil},
		{"negative replicas", StreamSpec{Name: "a", Subjects: []string{"t"}, Replicas: -1}, true, nil},
		{"no subjects", StreamSpec{Name: "a"}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := StreamConfig(tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("config %+v", c)
			}
		})
	}
}

func TestStreamName(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"team-a", "events"}:    "team-a_events",
		{"team-a", "events.v1"}: "team-a_events_v1",
	} {
		if got := StreamName(in[0], in[1]); got != want {
			t.Errorf("StreamName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
}

func TestUserPermissions(t *testing.T) {
	pub, sub := UserPermissions("u1", "ns_t", []string{"acme.orders.>"})
	for _, want := range []string{"acme.orders.>", "$JS.API.STREAM.INFO.ns_t", "$JS.API.CONSUMER.MSG.NEXT.ns_t.>", "$JS.ACK.ns_t.>"} {
		if !slices.Contains(pub, want) {
			t.Errorf("publish lacks %q: %v", want, pub)
		}
	}
	for _, p := range pub {
		if p == ">" || p == "$JS.API.>" || p == "$JS.>" {
			t.Errorf("publish holds the wildcard %q", p)
		}
	}
	if !slices.Equal(sub, []string{"acme.orders.>", "_INBOX_u1.>"}) {
		t.Errorf("subscribe = %v", sub)
	}
}
