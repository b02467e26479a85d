package deflate

import (
	"bytes"
	"compress/flate"
	"io"
	"sync"
)

var (
	writers = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(io.Discard, flate.BestSpeed)
		return w
	}}
	readers = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
)

// Compress returns data compressed, in a slice of its own (not the compressor's buffer).
func Compress(data []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(data)/3 + 64)
	w := writers.Get().(*flate.Writer)
	defer writers.Put(w)
	w.Reset(&out)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(data)
	_ = w.Close()
	return bytes.Clone(out.Bytes())
}

// Decompress returns what Compress compressed; an error for data it did not produce.
func Decompress(data []byte) ([]byte, error) {
	r := readers.Get().(io.ReadCloser)
	defer readers.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(data), nil); err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
