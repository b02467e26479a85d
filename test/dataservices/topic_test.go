package dataservices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/nats"
	"kubeos.dev/kube/internal/dataservices/s3"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

// The Topic, Bucket and Backup tests run on a NATS JetStream and a versitygw S3 store of
// their own (Kube's embedded ones, internal/dataservices/{nats,s3}, started in this process
// once), registered as the default entries nats-main and s3-main. TestEmbeddedServers checks
// that `kube server` itself registers its embedded ones.
var (
	embeddedOnce sync.Once
	embeddedErr  error
	natsServer   *nats.Embedded
	s3Server     *s3.Embedded
)

func embeddedServers(t *testing.T) {
	t.Helper()
	embeddedOnce.Do(func() { embeddedErr = startEmbedded() })
	if embeddedErr != nil {
		t.Fatal(embeddedErr)
	}
}

func startEmbedded() error {
	ctx := context.Background() // they stop with the test process (the S3 child when its stdin closes)
	log := slog.New(slog.DiscardHandler)
	var err error
	if natsServer, err = nats.NewEmbedded(nats.EmbeddedOptions{Dir: filepath.Join(dataDir, "test-nats"), Log: log}); err != nil {
		return err
	}
	if s3Server, err = s3.NewEmbedded(s3.EmbeddedOptions{Dir: filepath.Join(dataDir, "test-s3"), Log: log}); err != nil {
		return err
	}
	go func() { _ = natsServer.Start(ctx) }()
	go func() { _ = s3Server.Start(ctx) }()
	if err := natsServer.Err(); err != nil {
		return err
	}
	if err := s3Server.Err(); err != nil {
		return err
	}
	if err := registerServer(ctx, "nats-main", servers.NATS, natsServer.URL(), true, ""); err != nil {
		return err
	}
	access, secret := s3Server.RootKey()
	s := &corev1.Secret{Type: servers.SecretType, Data: map[string][]byte{servers.KeyURL: []byte(s3Server.Endpoint()),
		servers.KeyAccessKeyID: []byte(access), servers.KeySecretAccessKey: []byte(secret), servers.KeyRegion: []byte(s3Server.Region())}}
	s.Namespace, s.Name = servers.Namespace, "s3-main"
	s.Labels = map[string]string{servers.LabelKind: servers.S3}
	s.Annotations = map[string]string{servers.AnnotationDefault: "true"}
	return admin.Create(ctx, s)
}

func topic(ns, name, extra string) string {
	return fmt.Sprintf("apiVersion: kubeos.dev/v1alpha1\nkind: Topic\nmetadata: {name: %s, namespace: %s}\nspec: {%s}\n", name, ns, extra)
}

// natsAs connects with a Topic's connection Secret.
func natsAs(conn map[string]string) (*natsgo.Conn, error) {
	return natsgo.Connect(conn["uri"], natsgo.CustomInboxPrefix(conn["inboxPrefix"]), natsgo.MaxReconnects(0))
}

// natsAdmin is a provisioning client of the test NATS server.
func natsAdmin(t *testing.T) *nats.Client {
	t.Helper()
	c, err := nats.Dial(context.Background(), natsServer.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTopic(t *testing.T) {
	embeddedServers(t)
	ctx := context.Background()
	apply(t, aliceKubeconfig, topic(acmeNS, "events", `subjects: ["acme.events.>"], maxAge: 1h`))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}/{.status.stream}", "Active/acme-dev_events", "topic", "events", "-n", acmeNS)
	conn := secretData(t, acmeNS, "events-topic")

	t.Run("published messages are read by a consumer", func(t *testing.T) {
		for _, k := range []string{"host", "port", "username", "password", "uri", "subjectPrefix", "stream"} {
			if conn[k] == "" {
				t.Errorf("connection secret has no %s", k)
			}
		}
		if conn["subjectPrefix"] != "acme." || conn["stream"] != "acme-dev_events" {
			t.Errorf("subjectPrefix %q stream %q", conn["subjectPrefix"], conn["stream"])
		}
		nc, err := natsAs(conn)
		if err != nil {
			t.Fatalf("connect with the Topic's secret: %v", err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		for i := range 3 {
			if _, err := js.Publish(ctx, "acme.events.created", []byte(fmt.Sprintf("order-%d", i))); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		cons, err := js.OrderedConsumer(ctx, conn["stream"], jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatalf("consumer: %v", err)
		}
		for i := range 3 {
			m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
			if err != nil || string(m.Data()) != fmt.Sprintf("order-%d", i) {
				t.Fatalf("message %d: %v, %v", i, m, err)
			}
		}
		waitFor(t, aliceKubeconfig, 30*time.Second, "{.status.messages}", "3", "topic", "events", "-n", acmeNS)
	})

	t.Run("the Topic's user reaches nothing else", func(t *testing.T) {
		apply(t, bobKubeconfig, topic(globexNS, "ledger", `subjects: ["globex.ledger.>"]`))
		waitFor(t, bobKubeconfig, 60*time.Second, "{.status.phase}", "Active", "topic", "ledger", "-n", globexNS)
		nc, err := natsAs(conn)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := js.Publish(short, "globex.ledger.x", []byte("no")); err == nil {
			t.Error("published on another tenant's subject")
		}
		short2, cancel2 := context.WithTimeout(ctx, 2*time.Second)
		defer cancel2()
		if _, err := js.Stream(short2, "globex-dev_ledger"); err == nil {
			t.Error("read another tenant's stream")
		}
		if st, err := natsAdmin(t).StreamInfo(ctx, "globex-dev_ledger"); err != nil || st.Messages != 0 {
			t.Errorf("the other stream: %+v, %v", st, err)
		}
	})

	t.Run("what JetStream forbids is refused at admission", func(t *testing.T) {
		refused(t, bobKubeconfig, topic(globexNS, "steal", `subjects: ["acme.events.>"]`), "must lie under the tenant's prefix \"globex.\"")
		refused(t, aliceKubeconfig, topic(acmeNS, "neg", `replicas: -1`), "spec.replicas", "greater than or equal to 1")
		refused(t, aliceKubeconfig, topic(acmeNS, "bad", `retention: Forever`), "retention")
		_, errOut, err := kubectl(t, aliceKubeconfig, "", "patch", "topic", "events", "-n", acmeNS, "--type=merge", "-p", `{"spec":{"storage":"Memory"}}`)
		if err == nil || !strings.Contains(errOut, "cannot change a stream's storage") {
			t.Errorf("storage change: %v: %s", err, errOut)
		}
	})

	t.Run("a deleted stream is re-created with an event", func(t *testing.T) {
		if err := natsAdmin(t).DeleteStream(ctx, "acme-dev_events"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() error {
			_, err := natsAdmin(t).StreamInfo(ctx, "acme-dev_events")
			return err
		})
		eventually(t, 30*time.Second, func() error {
			if got := jsonpath(t, aliceKubeconfig, `{.status.conditions[?(@.type=="Ready")].reason}`, "topic", "events", "-n", acmeNS); got != "StreamRecreated" {
				return fmt.Errorf("Ready reason %q, want StreamRecreated", got)
			}
			return nil
		})
		eventually(t, 30*time.Second, func() error {
			out, _, _ := kubectl(t, aliceKubeconfig, "", "get", "events", "-n", acmeNS, "--field-selector", "involvedObject.name=events", "-o", "jsonpath={.items[*].reason}")
			if !strings.Contains(out, "StreamRecreated") {
				return fmt.Errorf("events: %q", out)
			}
			return nil
		})
	})
}

func TestTopicDeletionPolicy(t *testing.T) {
	embeddedServers(t)
	ctx := context.Background()
	apply(t, aliceKubeconfig, topic(acmeNS, "kept", ""))
	apply(t, aliceKubeconfig, topic(acmeNS, "dropped", "deletionPolicy: Delete"))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "topic", "kept", "-n", acmeNS)
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "topic", "dropped", "-n", acmeNS)
	kept := secretData(t, acmeNS, "kept-topic")
	if !strings.HasPrefix(kept["subjects"], "acme.") {
		t.Errorf("default subjects %q", kept["subjects"])
	}
	for _, n := range []string{"kept", "dropped"} {
		if _, errOut, err := kubectl(t, aliceKubeconfig, "", "delete", "topic", n, "-n", acmeNS, "--wait=true", "--timeout=60s"); err != nil {
			t.Fatalf("delete %s: %v: %s", n, err, errOut)
		}
	}
	c := natsAdmin(t)
	if _, err := c.StreamInfo(ctx, "acme-dev_kept"); err != nil {
		t.Errorf("Retain: the stream is gone: %v", err)
	}
	if _, err := c.StreamInfo(ctx, "acme-dev_dropped"); !errors.Is(err, nats.ErrStreamNotFound) {
		t.Errorf("Delete: the stream is still there: %v", err)
	}
	if nc, err := natsAs(kept); err == nil {
		nc.Close()
		t.Error("Retain: the Topic's user still logs in")
	}
}

// TestEmbeddedServers starts a `kube server` with its embedded NATS and S3 on (the flags'
// defaults) and checks it registers them as entries that work with their credentials.
func TestEmbeddedServers(t *testing.T) {
	ctx := context.Background()
	var log servertest.Buffer
	ts, err := servertest.StartWith(t.TempDir(), &log, func(o *server.Options) {
		o.EmbeddedNATS, o.EmbeddedS3 = true, true
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	defer ts.Stop()
	cfg, err := ts.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := servers.List(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]servers.Entry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	n, s := got[server.EmbeddedNATSEntry], got[server.EmbeddedS3Entry]
	if n.Kind != servers.NATS || !n.Default || s.Kind != servers.S3 || !s.Default {
		t.Fatalf("entries: %v", entries)
	}
	nc, err := nats.Dial(ctx, n.URL)
	if err != nil {
		t.Fatalf("the nats-embedded entry does not log in: %v", err)
	}
	nc.Close()
	a := s3.NewClient(s.URL, string(s.Data[servers.KeyAccessKeyID]), string(s.Data[servers.KeySecretAccessKey]), string(s.Data[servers.KeyRegion]))
	if _, err := a.CreateBucket(ctx, "probe"); err != nil {
		t.Fatalf("the s3-embedded entry does not create a bucket: %v", err)
	}
	if err := a.DeleteBucket(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
}
