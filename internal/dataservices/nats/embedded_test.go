package nats

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEmbedded starts the embedded server, provisions a stream and a user, and checks the
// user can publish and consume on its subjects only, and that a deleted user cannot log in.
func TestEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := NewEmbedded(EmbeddedOptions{Dir: t.TempDir(), Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Start(runCtx) }()
	defer func() { stop(); <-done }()
	<-e.Ready()
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}

	c, err := Dial(ctx, e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec := StreamSpec{Name: "team-a_events", Subjects: []string{"acme.events.>"}}
	if created, err := c.EnsureStream(ctx, spec); err != nil || !created {
		t.Fatalf("EnsureStream = %v, %v", created, err)
	}
	spec.MaxAge = time.Hour
	if created, err := c.EnsureStream(ctx, spec); err != nil || created {
		t.Fatalf("EnsureStream update = %v, %v", created, err)
	}
	if _, err := c.EnsureStream(ctx, StreamSpec{Name: "other", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	pw := RandomPassword()
	pub, sub := UserPermissions("u1", spec.Name, spec.Subjects)
	if err := c.PutUser(ctx, "u1", pw, pub, sub); err != nil {
		t.Fatal(err)
	}

	var nc *natsgo.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err = natsgo.Connect("nats://"+e.Addr(), natsgo.UserInfo("u1", pw), natsgo.CustomInboxPrefix(InboxPrefix("u1")))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("user connect: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctx, "acme.events.created", []byte("hello")); err != nil {
		t.Fatalf("publish on own subject: %v", err)
	}
	cons, err := js.OrderedConsumer(ctx, spec.Name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || string(msg.Data()) != "hello" {
		t.Fatalf("next = %v, %v", msg, err)
	}
	st, err := c.StreamInfo(ctx, spec.Name)
	if err != nil || st.Messages != 1 || st.Config.MaxAge != time.Hour {
		t.Fatalf("StreamInfo = %+v, %v", st, err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := js.Publish(pctx, "other.x", []byte("no")); err == nil {
		t.Errorf("publish on another stream's subject succeeded")
	}
	pcancel()
	pctx, pcancel = context.WithTimeout(ctx, 2*time.Second)
	if _, err := js.Stream(pctx, "other"); err == nil {
		t.Errorf("user read another stream's info")
	}
	pcancel()

	if err := c.DeleteUser(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		nc2, err := natsgo.Connect("nats://"+e.Addr(), natsgo.UserInfo("u1", pw))
		if err != nil {
			break
		}
		nc2.Close()
		if time.Now().After(deadline) {
			t.Fatal("deleted user still logs in")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := natsgo.Connect("nats://"+e.Addr(), natsgo.UserInfo(AdminUser, "wrong")); err == nil {
		t.Error("admin with a wrong password logged in")
	}
	if err := c.DeleteStream(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StreamInfo(ctx, spec.Name); !errors.Is(err, ErrStreamNotFound) {
		t.Errorf("StreamInfo after delete = %v", err)
	}
}
