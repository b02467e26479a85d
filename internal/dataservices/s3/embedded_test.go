package s3

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEmbedded starts the embedded store, gives a bucket an access key of its own, and checks
// the key can write and read its bucket only, and that the admin can empty and delete it.
func TestEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	access, secret := e.RootKey()
	admin := NewClient(e.Endpoint(), access, secret, e.Region())
	adm := NewAdmin(e.Endpoint(), access, secret, e.Region())

	for _, b := range []string{"media", "other"} {
		if created, err := admin.CreateBucket(ctx, b); err != nil || !created {
			t.Fatalf("CreateBucket(%s) = %v, %v", b, created, err)
		}
	}
	if created, err := admin.CreateBucket(ctx, "media"); err != nil || created {
		t.Fatalf("CreateBucket again = %v, %v", created, err)
	}
	key, sec := "media-key", RandomString(20)
	if err := adm.CreateUser(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateUser(ctx, key, sec); err != nil {
		t.Fatalf("CreateUser again: %v", err)
	}
	if err := adm.ChangeBucketOwner(ctx, "media", key); err != nil {
		t.Fatal(err)
	}
	user := NewClient(e.Endpoint(), key, sec, e.Region())
	if err := user.Put(ctx, "media", "a/b.txt", strings.NewReader("hello"), 5); err != nil {
		t.Fatalf("put with the bucket's key: %v", err)
	}
	rc, err := user.Get(ctx, "media", "a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello" {
		t.Fatalf("got %q", b)
	}
	if err := user.Put(ctx, "other", "x", strings.NewReader("no"), 2); err == nil {
		t.Error("the bucket's key wrote to another bucket")
	}
	if _, err := user.List(ctx, "other", ""); err == nil {
		t.Error("the bucket's key listed another bucket")
	}
	if _, err := user.CreateBucket(ctx, "mine"); err == nil {
		t.Error("the bucket's key created a bucket")
	}
	if n, objs, err := admin.Usage(ctx, "media"); err != nil || n != 5 || objs != 1 {
		t.Errorf("Usage = %d, %d, %v", n, objs, err)
	}
	if err := admin.DeleteBucket(ctx, "media"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Errorf("DeleteBucket of a full bucket = %v", err)
	}
	if err := admin.Empty(ctx, "media"); err != nil {
		t.Fatal(err)
	}
	if empty, err := admin.IsEmpty(ctx, "media"); err != nil || !empty {
		t.Fatalf("IsEmpty = %v, %v", empty, err)
	}
	if err := admin.DeleteBucket(ctx, "media"); err != nil {
		t.Fatal(err)
	}
	if ok, err := admin.BucketExists(ctx, "media"); err != nil || ok {
		t.Errorf("BucketExists after delete = %v, %v", ok, err)
	}
	if err := adm.DeleteUser(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := user.List(ctx, "other", ""); err == nil {
		t.Error("a deleted key still lists")
	}
}
