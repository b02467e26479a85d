package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrStreamNotFound is returned by StreamInfo for a stream the server does not have.
var ErrStreamNotFound = errors.New("stream not found")

// Client provisions streams and users on one server with its admin credentials.
type Client struct {
	nc *natsgo.Conn
	js jetstream.JetStream
}

// Dial connects to a server entry's URL (nats://user:password@host:port).
func Dial(ctx context.Context, rawURL string) (*Client, error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	nc, err := natsgo.Connect(rawURL, natsgo.Name("kube-provisioner"), natsgo.Timeout(timeout),
		natsgo.RetryOnFailedConnect(false))
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// Connected tells whether the connection is up (a pooled client that is not is dialled anew).
func (c *Client) Connected() bool { return c.nc.IsConnected() }

// JetStream is the client's JetStream context, for callers that read or write messages.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// StreamState is what StreamInfo reports.
type StreamState struct {
	Config    jetstream.StreamConfig
	Messages  uint64
	Bytes     uint64
	Consumers int
	// LastSeq is the stream's last sequence.
	LastSeq uint64
}

// EnsureStream creates the stream or updates it to the spec; created tells which.
func (c *Client) EnsureStream(ctx context.Context, s StreamSpec) (created bool, err error) {
	cfg, err := StreamConfig(s)
	if err != nil {
		return false, err
	}
	_, err = c.js.Stream(ctx, s.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := c.js.CreateStream(ctx, cfg); err != nil {
			return false, fmt.Errorf("nats: create stream %s: %w", s.Name, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("nats: stream %s: %w", s.Name, err)
	}
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		return false, fmt.Errorf("nats: update stream %s: %w", s.Name, err)
	}
	return false, nil
}

// StreamInfo reports a stream's configuration and state; ErrStreamNotFound if it is gone.
func (c *Client) StreamInfo(ctx context.Context, name string) (StreamState, error) {
	st, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return StreamState{}, fmt.Errorf("nats: stream %s: %w", name, ErrStreamNotFound)
	}
	if err != nil {
		return StreamState{}, fmt.Errorf("nats: stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return StreamState{}, fmt.Errorf("nats: stream %s info: %w", name, err)
	}
	return StreamState{Config: info.Config, Messages: info.State.Msgs, Bytes: info.State.Bytes,
		Consumers: info.State.Consumers, LastSeq: info.State.LastSeq}, nil
}

// DeleteStream removes a stream and its messages; a missing one is no error.
func (c *Client) DeleteStream(ctx context.Context, name string) error {
	err := c.js.DeleteStream(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("nats: delete stream %s: %w", name, err)
	}
	return nil
}

func (c *Client) users(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := c.js.KeyValue(ctx, UsersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return ensureUsersBucket(ctx, c.js)
	}
	if err != nil {
		return nil, fmt.Errorf("nats: users bucket: %w", err)
	}
	return kv, nil
}

// PutUser writes a user to the server's directory (enforced by Kube's embedded server).
func (c *Client) PutUser(ctx context.Context, name, password string, publish, subscribe []string) error {
	kv, err := c.users(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(UserRecord{PasswordSHA256: HashPassword(password), Publish: publish, Subscribe: subscribe})
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, name, b); err != nil {
		return fmt.Errorf("nats: put user %s: %w", name, err)
	}
	return nil
}

// User reads a user's record; ok is false if there is none.
func (c *Client) User(ctx context.Context, name string) (r UserRecord, ok bool, err error) {
	kv, err := c.users(ctx)
	if err != nil {
		return r, false, err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("nats: user %s: %w", name, err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, false, fmt.Errorf("nats: user %s: %w", name, err)
	}
	return r, true, nil
}

// DeleteUser removes a user from the directory; a missing one is no error.
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	kv, err := c.users(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("nats: delete user %s: %w", name, err)
	}
	return nil
}
