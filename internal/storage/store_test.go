package storage_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
	"kubeos.dev/kube/internal/storage/storagetest"
)

// client talks to the one etcd member the package's tests and benchmarks share; every test
// writes under its own prefix.
var client *clientv3.Client

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "storage-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer member.Close()
	client, err = etcd.NewClient(etcd.ClientOptions{Endpoints: member.ClientURLs()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer client.Close()
	return m.Run()
}

func TestStore(t *testing.T) {
	store := storage.New(client)
	storagetest.Run(t, func(*testing.T) storagetest.Store { return store })
}
