package backup

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"kubeos.dev/kube/internal/dataservices/nats"
)

// streamMsg is one line of a stream archive.
type streamMsg struct {
	Subject string              `json:"s"`
	Header  map[string][]string `json:"h,omitempty"`
	Data    []byte              `json:"d"`
	Time    time.Time           `json:"t"`
}

// A stream archive (version 2) is the server's own JetStream snapshot followed by a
// message-level export of the same messages:
//
//	"KUBEJS2\n"
//	frame 'H': JSON streamHeader (the stream, its subjects, the snapshot's config and state)
//	frames 'S': the snapshot's chunks, as the server sent them
//	frame 'E' (empty): the end of the snapshot
//	the export: gzip'd JSON lines (a Header, then one streamMsg per message up to the
//	snapshot's last sequence)
//
// A frame is its type byte, a big-endian uint32 length and the payload. The snapshot
// restores the stream exactly (sequences, timestamps, consumers) but only under its own
// name; the export restores into any stream. Version 1 archives (the export alone) still
// restore.
const streamMagic = "KUBEJS2\n"

// streamHeader is the 'H' frame.
type streamHeader struct {
	Stream   string             `json:"stream"`
	Subjects []string           `json:"subjects,omitempty"`
	Snapshot *nats.SnapshotInfo `json:"snapshot,omitempty"`
}

func writeFrame(w io.Writer, typ byte, b []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(b)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// maxFrame bounds a frame read from an archive (the server's chunks are at most 1 MiB).
const maxFrame = 16 << 20

func readFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, fmt.Errorf("archive: %w", err)
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("archive: a frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, fmt.Errorf("archive: %w", err)
	}
	return h[0], b, nil
}

// DumpStream writes a stream's archive to w: the server's snapshot of the stream (none
// when the server cannot snapshot it, as for a memory stream), then every message up to
// the snapshot's last sequence read with an ordered consumer. It returns how many messages.
func DumpStream(ctx context.Context, adminURL, stream string, w io.Writer) (int, error) {
	c, err := nats.Dial(ctx, adminURL)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	st, err := c.StreamInfo(ctx, stream)
	if err != nil {
		return 0, err
	}
	if _, err := io.WriteString(w, streamMagic); err != nil {
		return 0, err
	}
	h := streamHeader{Stream: stream, Subjects: st.Config.Subjects}
	begin := func(info nats.SnapshotInfo) error {
		h.Snapshot = &info
		b, _ := json.Marshal(h)
		return writeFrame(w, 'H', b)
	}
	info, err := c.Snapshot(ctx, stream, begin, func(b []byte) error { return writeFrame(w, 'S', b) })
	last := info.LastSeq()
	switch {
	case errors.Is(err, nats.ErrNoSnapshot):
		b, _ := json.Marshal(h)
		if err := writeFrame(w, 'H', b); err != nil {
			return 0, err
		}
		fresh, err := c.StreamInfo(ctx, stream)
		if err != nil {
			return 0, err
		}
		last = fresh.LastSeq
	case err != nil:
		return 0, err
	}
	if err := writeFrame(w, 'E', nil); err != nil {
		return 0, err
	}
	return exportStream(ctx, c, stream, st.Config.Subjects, last, w)
}

// exportStream writes the messages of a stream up to sequence last as gzip'd JSON lines.
func exportStream(ctx context.Context, c *nats.Client, stream string, subjects []string, last uint64, w io.Writer) (int, error) {
	jw, err := newJSONLWriter(w, Header{Kind: "jetstream", Version: 1, Stream: stream, Subjects: subjects})
	if err != nil {
		return 0, err
	}
	n := 0
	if last > 0 {
		st, err := c.JetStream().Stream(ctx, stream)
		if err != nil {
			return 0, fmt.Errorf("stream %s: %w", stream, err)
		}
		cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return 0, fmt.Errorf("stream %s consumer: %w", stream, err)
		}
		for {
			msg, err := cons.Next(jetstream.FetchContext(ctx))
			if err != nil {
				return n, fmt.Errorf("stream %s: read: %w", stream, err)
			}
			md, err := msg.Metadata()
			if err != nil {
				return n, err
			}
			if md.Sequence.Stream > last {
				break
			}
			if err := jw.Write(streamMsg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data(), Time: md.Timestamp}); err != nil {
				return n, err
			}
			n++
			if md.Sequence.Stream == last {
				break
			}
		}
	}
	return n, jw.Close()
}

// SubjectMapping maps the subjects of an archive's stream to those of the stream it is
// restored to: unchanged when they are the same; when each has one subject "a.b.>" and
// "c.d.>", the prefix is replaced; else unchanged (a subject the target does not take fails).
func SubjectMapping(from, to []string) func(string) string {
	id := func(s string) string { return s }
	if len(from) != 1 || len(to) != 1 || from[0] == to[0] || !strings.HasSuffix(from[0], ".>") || !strings.HasSuffix(to[0], ".>") {
		return id
	}
	fp, tp := strings.TrimSuffix(from[0], ">"), strings.TrimSuffix(to[0], ">")
	return func(s string) string {
		if strings.HasPrefix(s, fp) {
			return tp + strings.TrimPrefix(s, fp)
		}
		return s
	}
}

// RestoreStream restores an archive into a stream. When the archive holds a snapshot of a
// stream of the same name and that stream does not exist, the server restores the snapshot
// (sequences, timestamps and consumers as they were) and ensure then brings the stream's
// configuration to its spec; otherwise ensure creates or updates the stream and the
// archive's messages are published to it in order (their subjects mapped by SubjectMapping
// when the stream's subjects are not the archive's; a message that another stream takes
// fails the restore). It returns how many messages the stream got.
func RestoreStream(ctx context.Context, adminURL, stream string, r io.Reader, ensure func(context.Context) error) (int, error) {
	c, err := nats.Dial(ctx, adminURL)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	br := bufio.NewReader(r)
	magic, err := br.Peek(len(streamMagic))
	if err != nil || string(magic) != streamMagic {
		// Version 1: the export alone.
		if err := ensure(ctx); err != nil {
			return 0, err
		}
		return publishExport(ctx, c, stream, br)
	}
	_, _ = br.Discard(len(streamMagic))
	typ, b, err := readFrame(br)
	if err != nil {
		return 0, err
	}
	var h streamHeader
	if typ != 'H' || json.Unmarshal(b, &h) != nil {
		return 0, errors.New("archive: no stream header")
	}
	next := func() ([]byte, error) {
		typ, b, err := readFrame(br)
		switch {
		case err != nil:
			return nil, err
		case typ == 'E':
			return nil, io.EOF
		case typ != 'S':
			return nil, fmt.Errorf("archive: unexpected frame %q", typ)
		}
		return b, nil
	}
	_, statErr := c.StreamInfo(ctx, stream)
	if h.Snapshot != nil && h.Stream == stream && errors.Is(statErr, nats.ErrStreamNotFound) {
		n, err := c.Restore(ctx, stream, *h.Snapshot, next)
		if err != nil {
			return 0, err
		}
		return int(n), ensure(ctx)
	}
	for {
		if _, err := next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return 0, err
		}
	}
	if err := ensure(ctx); err != nil {
		return 0, err
	}
	return publishExport(ctx, c, stream, br)
}

// publishExport publishes an export's messages to a stream, in order.
func publishExport(ctx context.Context, c *nats.Client, stream string, r io.Reader) (int, error) {
	js := c.JetStream()
	jr, h, err := newJSONLReader(r, "jetstream")
	if err != nil {
		return 0, err
	}
	info, err := c.StreamInfo(ctx, stream)
	if err != nil {
		return 0, err
	}
	remap := SubjectMapping(h.Subjects, info.Config.Subjects)
	n := 0
	for {
		var m streamMsg
		err := jr.Next(&m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("archive: %w", err)
		}
		msg := &natsgo.Msg{Subject: remap(m.Subject), Data: m.Data, Header: natsgo.Header(m.Header)}
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			return n, fmt.Errorf("stream %s: publish %s: %w", stream, m.Subject, err)
		}
		if ack.Stream != stream {
			return n, fmt.Errorf("stream %s: subject %s is stream %s's", stream, m.Subject, ack.Stream)
		}
		n++
	}
}
