package simnode

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestStartAgain: Start runs again in a new leadership term after the last one ended (the
// last term's dispatch closed its work channel; sending on it panicked).
func TestStartAgain(t *testing.T) {
	// No API server answers: the node status tasks are due at once, dispatched, and fail.
	s, err := New(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 100 * time.Millisecond}, Options{Nodes: 2, Prefix: "again-"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for term := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if err := s.Start(ctx); err != nil {
			t.Fatalf("term %d: %v", term, err)
		}
		cancel()
	}
}
