package backup

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
)

// Header is the first line of a Redis or stream archive.
type Header struct {
	// Kind is "redis" or "jetstream".
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Prefix is the key prefix a Redis archive was made of.
	Prefix string `json:"prefix,omitempty"`
	// Stream is the stream a JetStream archive was made of, Subjects its subjects.
	Stream   string   `json:"stream,omitempty"`
	Subjects []string `json:"subjects,omitempty"`
}

// jsonlWriter writes gzip'd JSON lines.
type jsonlWriter struct {
	gz  *gzip.Writer
	enc *json.Encoder
}

func newJSONLWriter(w io.Writer, h Header) (*jsonlWriter, error) {
	gz := gzip.NewWriter(w)
	jw := &jsonlWriter{gz: gz, enc: json.NewEncoder(gz)}
	return jw, jw.enc.Encode(h)
}

func (w *jsonlWriter) Write(v any) error { return w.enc.Encode(v) }
func (w *jsonlWriter) Close() error      { return w.gz.Close() }

// jsonlReader reads gzip'd JSON lines.
type jsonlReader struct {
	dec *json.Decoder
	gz  *gzip.Reader
}

func newJSONLReader(r io.Reader, kind string) (*jsonlReader, Header, error) {
	var h Header
	gz, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, h, fmt.Errorf("archive: %w", err)
	}
	dec := json.NewDecoder(gz)
	if err := dec.Decode(&h); err != nil {
		return nil, h, fmt.Errorf("archive header: %w", err)
	}
	if h.Kind != kind {
		return nil, h, fmt.Errorf("archive of kind %q, not %q", h.Kind, kind)
	}
	return &jsonlReader{dec: dec, gz: gz}, h, nil
}

// Next decodes the next line into v; io.EOF at the end.
func (r *jsonlReader) Next(v any) error { return r.dec.Decode(v) }
