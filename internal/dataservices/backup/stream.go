package backup

import (
	"context"
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

// DumpStream writes every message of a stream to w, read with an ordered consumer up to the
// last sequence the stream had when the dump began; it returns how many.
func DumpStream(ctx context.Context, adminURL, stream string, w io.Writer) (int, error) {
	c, err := nats.Dial(ctx, adminURL)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	js := c.JetStream()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	jw, err := newJSONLWriter(w, Header{Kind: "jetstream", Version: 1, Stream: stream, Subjects: info.Config.Subjects})
	if err != nil {
		return 0, err
	}
	last := info.State.LastSeq
	n := 0
	if info.State.Msgs > 0 {
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
			if err := jw.Write(streamMsg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data(), Time: md.Timestamp}); err != nil {
				return n, err
			}
			n++
			if md.Sequence.Stream >= last {
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

// RestoreStream publishes an archive's messages, in order, to a stream (their subjects mapped
// by SubjectMapping when the stream's subjects are not the archive's); a message that
// another stream takes fails the restore. It returns how many.
func RestoreStream(ctx context.Context, adminURL, stream string, r io.Reader) (int, error) {
	c, err := nats.Dial(ctx, adminURL)
	if err != nil {
		return 0, err
	}
	defer c.Close()
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
