package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	natsgo "github.com/nats-io/nats.go"
)

// JetStream's snapshot and restore API ($JS.API.STREAM.SNAPSHOT / RESTORE), which nats.go
// does not wrap: the server streams the stream's store — an s2-compressed tar of its message
// blocks, consumers and metadata — in chunks to an inbox, each acknowledged for flow control,
// and takes one back the same way to recreate the stream with its sequences, timestamps and
// consumers intact.

const (
	snapshotChunkSize = 128 << 10
	apiSnapshot       = "$JS.API.STREAM.SNAPSHOT."
	apiRestore        = "$JS.API.STREAM.RESTORE."
)

// ErrNoSnapshot is Snapshot's answer for a stream whose store the server cannot snapshot
// (a memory stream).
var ErrNoSnapshot = errors.New("the server cannot snapshot this stream")

// apiError is the error of a JetStream API response.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%d, %d)", e.Description, e.Code, e.ErrCode)
}

// SnapshotInfo is what a snapshot carries besides its chunks: the stream's configuration
// and state when it was taken, as the server reports them (JSON).
type SnapshotInfo struct {
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// LastSeq is the stream's last sequence in the snapshot.
func (s SnapshotInfo) LastSeq() uint64 {
	var st struct {
		LastSeq uint64 `json:"last_seq"`
	}
	_ = json.Unmarshal(s.State, &st)
	return st.LastSeq
}

// Snapshot takes a snapshot of a stream: begin gets its configuration and state before the
// first chunk, chunk each chunk in order as the server sends it. A stream the server cannot
// snapshot gives ErrNoSnapshot, before begin is called.
func (c *Client) Snapshot(ctx context.Context, stream string, begin func(SnapshotInfo) error, chunk func([]byte) error) (SnapshotInfo, error) {
	inbox := natsgo.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: %w", stream, err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, 64<<20)
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": snapshotChunkSize})
	msg, err := c.nc.RequestWithContext(ctx, apiSnapshot+stream, req)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: %w", stream, err)
	}
	var resp struct {
		SnapshotInfo
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: response: %w", stream, err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 && resp.Error.ErrCode == 10059 {
			return SnapshotInfo{}, fmt.Errorf("nats: stream %s: %w", stream, ErrStreamNotFound)
		}
		return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: %w (%w)", stream, resp.Error, ErrNoSnapshot)
	}
	if err := begin(resp.SnapshotInfo); err != nil {
		return SnapshotInfo{}, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: %w", stream, err)
		}
		if len(m.Data) == 0 {
			// The end: status 204 (or none) when complete, else the server's failure.
			if st := m.Header.Get("Status"); st != "" && st != "204" {
				return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: %s %s", stream, st, m.Header.Get("Description"))
			}
			return resp.SnapshotInfo, nil
		}
		if err := chunk(m.Data); err != nil {
			return SnapshotInfo{}, err
		}
		if m.Reply != "" {
			if err := m.Respond(nil); err != nil {
				return SnapshotInfo{}, fmt.Errorf("nats: snapshot %s: ack: %w", stream, err)
			}
		}
	}
}

// Restore recreates a stream, which must not exist, from a snapshot of a stream of the same
// name: next returns its chunks in order and io.EOF after the last. It returns the number of
// messages the restored stream holds.
func (c *Client) Restore(ctx context.Context, stream string, info SnapshotInfo, next func() ([]byte, error)) (uint64, error) {
	req, _ := json.Marshal(map[string]json.RawMessage{"config": info.Config, "state": info.State})
	msg, err := c.nc.RequestWithContext(ctx, apiRestore+stream, req)
	if err != nil {
		return 0, fmt.Errorf("nats: restore %s: %w", stream, err)
	}
	var resp struct {
		DeliverSubject string    `json:"deliver_subject"`
		Error          *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("nats: restore %s: response: %w", stream, err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("nats: restore %s: %w", stream, resp.Error)
	}
	// The last reply is the stream's creation response (its StreamInfo inline).
	var created struct {
		Error *apiError `json:"error"`
		State *struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
	}
	for {
		b, err := next()
		if errors.Is(err, io.EOF) {
			b = nil
		} else if err != nil {
			return 0, err
		} else if len(b) == 0 {
			continue
		}
		ack, rerr := c.nc.RequestWithContext(ctx, resp.DeliverSubject, b)
		if rerr != nil {
			return 0, fmt.Errorf("nats: restore %s: %w", stream, rerr)
		}
		if len(ack.Data) > 0 {
			if err := json.Unmarshal(ack.Data, &created); err != nil {
				return 0, fmt.Errorf("nats: restore %s: response: %w", stream, err)
			}
			if created.Error != nil {
				return 0, fmt.Errorf("nats: restore %s: %w", stream, created.Error)
			}
		}
		if b == nil {
			if created.State == nil {
				return 0, fmt.Errorf("nats: restore %s: the server did not report the restored stream", stream)
			}
			return created.State.Msgs, nil
		}
	}
}
