package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Admin calls versitygw's admin API with the root key.
type Admin struct {
	endpoint       string
	access, secret string
	region         string
	http           *http.Client
}

// NewAdmin returns an admin client of a versitygw endpoint.
func NewAdmin(endpoint, access, secret, region string) *Admin {
	if region == "" {
		region = "us-east-1"
	}
	return &Admin{endpoint: strings.TrimSuffix(endpoint, "/"), access: access, secret: secret, region: region,
		http: &http.Client{Timeout: 30 * time.Second}}
}

// account is versitygw's auth.Account as its admin API reads it.
type account struct {
	XMLName xml.Name `xml:"Account"`
	Access  string   `xml:"Access"`
	Secret  string   `xml:"Secret"`
	Role    string   `xml:"Role"`
}

// CreateUser creates an account of role "user" (no bucket creation, no grant on buckets it
// does not own). An account that exists already is replaced by deleting it first, so that
// the secret is the one given.
func (a *Admin) CreateUser(ctx context.Context, access, secret string) error {
	body, err := xml.Marshal(account{Access: access, Secret: secret, Role: "user"})
	if err != nil {
		return err
	}
	err = a.do(ctx, "/create-user", nil, body)
	if err != nil && strings.Contains(err.Error(), "XAdminUserExists") {
		if err := a.DeleteUser(ctx, access); err != nil {
			return err
		}
		err = a.do(ctx, "/create-user", nil, body)
	}
	if err != nil {
		return fmt.Errorf("s3 admin: create user %s: %w", access, err)
	}
	return nil
}

// DeleteUser deletes an account; a missing one is no error.
func (a *Admin) DeleteUser(ctx context.Context, access string) error {
	err := a.do(ctx, "/delete-user", url.Values{"access": {access}}, nil)
	if err != nil && !strings.Contains(err.Error(), "XAdminUserNotFound") {
		return fmt.Errorf("s3 admin: delete user %s: %w", access, err)
	}
	return nil
}

// ChangeBucketOwner makes an account the owner of a bucket.
func (a *Admin) ChangeBucketOwner(ctx context.Context, bucket, owner string) error {
	if err := a.do(ctx, "/change-bucket-owner/", url.Values{"bucket": {bucket}, "owner": {owner}}, nil); err != nil {
		return fmt.Errorf("s3 admin: change owner of %s to %s: %w", bucket, owner, err)
	}
	return nil
}

func (a *Admin) do(ctx context.Context, path string, q url.Values, body []byte) error {
	u := a.endpoint + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: a.access, SecretAccessKey: a.secret},
		req, payload, "s3", a.region, time.Now()); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 400 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
