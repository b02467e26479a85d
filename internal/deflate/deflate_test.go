package deflate

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("x"), []byte(strings.Repeat(`{"type":"object","properties":{}}`, 500))} {
		out, err := Decompress(Compress(in))
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes: %d bytes, %v", len(in), len(out), err)
		}
	}
	if _, err := Decompress([]byte("not deflate at all")); err == nil {
		t.Error("garbage decompressed without an error")
	}
}

// TestConcurrent: the pooled compressors and decompressors are safe to share (run with -race).
func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := bytes.Repeat([]byte{byte('a' + i)}, 10000+i)
			for range 50 {
				out, err := Decompress(Compress(in))
				if err != nil || !bytes.Equal(out, in) {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzDecompress(f *testing.F) {
	f.Add(Compress([]byte(`{"a":1}`)))
	f.Add([]byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Decompress(data)
		if err == nil {
			if again, err := Decompress(Compress(out)); err != nil || !bytes.Equal(again, out) {
				t.Fatalf("round trip of a decompressed value failed: %v", err)
			}
		}
	})
}
