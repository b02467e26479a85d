package dataservices

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"kubeos.dev/kube/internal/dataservices/s3"
)

func bucket(ns, name, extra string) string {
	return fmt.Sprintf("apiVersion: kubeos.dev/v1alpha1\nkind: Bucket\nmetadata: {name: %s, namespace: %s}\nspec: {%s}\n", name, ns, extra)
}

// s3As is a client with a Bucket's connection Secret.
func s3As(conn map[string]string) *s3.Client {
	return s3.NewClient(conn["COSI_S3_ENDPOINT"], conn["COSI_S3_ACCESS_KEY_ID"], conn["COSI_S3_ACCESS_SECRET_KEY"], conn["COSI_S3_REGION"])
}

func s3Admin() *s3.Client {
	access, secret := s3Server.RootKey()
	return s3.NewClient(s3Server.Endpoint(), access, secret, s3Server.Region())
}

func TestBucket(t *testing.T) {
	embeddedServers(t)
	ctx := context.Background()
	apply(t, aliceKubeconfig, bucket(acmeNS, "media", "versioning: true"))
	apply(t, bobKubeconfig, bucket(globexNS, "media", ""))
	waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}/{.status.bucketName}", "Active/acme-dev-media", "bucket", "media", "-n", acmeNS)
	waitFor(t, bobKubeconfig, 60*time.Second, "{.status.phase}", "Active", "bucket", "media", "-n", globexNS)
	conn := secretData(t, acmeNS, "media-bucket")
	c := s3As(conn)

	t.Run("an object goes in with the bucket's key", func(t *testing.T) {
		for _, k := range []string{"COSI_S3_ENDPOINT", "COSI_S3_BUCKET_NAME", "COSI_S3_ACCESS_KEY_ID", "COSI_S3_ACCESS_SECRET_KEY", "COSI_S3_REGION"} {
			if conn[k] == "" {
				t.Errorf("connection secret has no %s", k)
			}
		}
		if err := c.Put(ctx, conn["COSI_S3_BUCKET_NAME"], "cat.jpg", strings.NewReader("meow"), 4); err != nil {
			t.Fatal(err)
		}
		rc, err := c.Get(ctx, conn["COSI_S3_BUCKET_NAME"], "cat.jpg")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "meow" {
			t.Errorf("read %q", b)
		}
		waitFor(t, aliceKubeconfig, 30*time.Second, "{.status.usageBytes}", "4", "bucket", "media", "-n", acmeNS)
		if id := jsonpath(t, aliceKubeconfig, "{.status.accessKeyID}", "bucket", "media", "-n", acmeNS); id != conn["COSI_S3_ACCESS_KEY_ID"] {
			t.Errorf("status.accessKeyID %q", id)
		}
		if v, err := s3Admin().Versioning(ctx, "acme-dev-media"); err != nil || !v {
			t.Errorf("versioning = %v, %v", v, err)
		}
	})

	t.Run("the key is refused on another bucket", func(t *testing.T) {
		if err := c.Put(ctx, "globex-dev-media", "x", strings.NewReader("no"), 2); err == nil {
			t.Error("wrote into another tenant's bucket")
		}
		if _, err := c.List(ctx, "globex-dev-media", ""); err == nil {
			t.Error("listed another tenant's bucket")
		}
		if _, err := c.CreateBucket(ctx, "acme-dev-more"); err == nil {
			t.Error("the bucket's key created a bucket")
		}
	})

	t.Run("another tenant cannot name the bucket", func(t *testing.T) {
		refused(t, bobKubeconfig, bucket(globexNS, "steal", "bucketName: acme-dev-media, existing: true"), "belongs to another tenant")
		refused(t, aliceKubeconfig, bucket(acmeNS, "bad", "bucketName: Not_A_Bucket"), "spec.bucketName")
		refused(t, aliceKubeconfig, bucket(acmeNS, "bad", "bucketName: a..b"), "spec.bucketName", "S3 bucket name")
	})
}

func TestBucketDeletionPolicy(t *testing.T) {
	embeddedServers(t)
	ctx := context.Background()
	apply(t, aliceKubeconfig, bucket(acmeNS, "kept", ""))
	apply(t, aliceKubeconfig, bucket(acmeNS, "dropped", "deletionPolicy: Delete"))
	apply(t, aliceKubeconfig, bucket(acmeNS, "ifempty", "deletionPolicy: DeleteIfEmpty"))
	for _, n := range []string{"kept", "dropped", "ifempty"} {
		waitFor(t, aliceKubeconfig, 60*time.Second, "{.status.phase}", "Active", "bucket", n, "-n", acmeNS)
	}
	kept := secretData(t, acmeNS, "kept-bucket")
	for _, n := range []string{"kept", "dropped"} {
		conn := secretData(t, acmeNS, n+"-bucket")
		if err := s3As(conn).Put(ctx, conn["COSI_S3_BUCKET_NAME"], "data.bin", strings.NewReader("12345"), 5); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"kept", "dropped", "ifempty"} {
		if _, errOut, err := kubectl(t, aliceKubeconfig, "", "delete", "bucket", n, "-n", acmeNS, "--wait=true", "--timeout=60s"); err != nil {
			t.Fatalf("delete %s: %v: %s", n, err, errOut)
		}
	}
	a := s3Admin()
	if objs, err := a.List(ctx, "acme-dev-kept", ""); err != nil || len(objs) != 1 {
		t.Errorf("Retain: bucket objects %v, %v", objs, err)
	}
	if _, err := s3As(kept).List(ctx, "acme-dev-kept", ""); err == nil {
		t.Error("Retain: the Bucket's key still works")
	}
	for _, b := range []string{"acme-dev-dropped", "acme-dev-ifempty"} {
		if ok, err := a.BucketExists(ctx, b); err != nil || ok {
			t.Errorf("%s still exists: %v, %v", b, ok, err)
		}
	}
}
