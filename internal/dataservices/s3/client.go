package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// ErrBucketNotFound is returned for a bucket the server does not have.
var ErrBucketNotFound = errors.New("bucket not found")

// ErrBucketNotEmpty is returned by DeleteBucket for a bucket that holds objects.
var ErrBucketNotEmpty = errors.New("bucket not empty")

// Client is an S3 client with one key (the admin's or a bucket's).
type Client struct {
	s3 *s3.Client
}

// NewClient returns a path-style client of an endpoint.
func NewClient(endpoint, access, secret, region string) *Client {
	if region == "" {
		region = "us-east-1"
	}
	c := s3.New(s3.Options{
		BaseEndpoint:               aws.String(endpoint),
		Region:                     region,
		Credentials:                credentials.NewStaticCredentialsProvider(access, secret, ""),
		UsePathStyle:               true,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		HTTPClient:                 &http.Client{Timeout: 10 * time.Minute},
		RetryMaxAttempts:           2,
	})
	return &Client{s3: c}
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// CreateBucket creates a bucket; one this key owns already is no error.
func (c *Client) CreateBucket(ctx context.Context, bucket string) (created bool, err error) {
	_, err = c.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	switch code(err) {
	case "":
		if err != nil {
			return false, fmt.Errorf("s3: create bucket %s: %w", bucket, err)
		}
		return true, nil
	case "BucketAlreadyOwnedByYou":
		return false, nil
	}
	return false, fmt.Errorf("s3: create bucket %s: %w", bucket, err)
}

// BucketExists tells whether the bucket exists (and this key may see it).
func (c *Client) BucketExists(ctx context.Context, bucket string) (bool, error) {
	_, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil {
		return true, nil
	}
	var nf *types.NotFound
	if errors.As(err, &nf) || code(err) == "NoSuchBucket" || code(err) == "NotFound" {
		return false, nil
	}
	return false, fmt.Errorf("s3: head bucket %s: %w", bucket, err)
}

// SetVersioning turns versioning on or suspends it.
func (c *Client) SetVersioning(ctx context.Context, bucket string, on bool) error {
	st := types.BucketVersioningStatusSuspended
	if on {
		st = types.BucketVersioningStatusEnabled
	}
	_, err := c.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: st}})
	if err != nil {
		return fmt.Errorf("s3: versioning of %s: %w", bucket, err)
	}
	return nil
}

// Versioning tells whether versioning is enabled.
func (c *Client) Versioning(ctx context.Context, bucket string) (bool, error) {
	out, err := c.s3.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	if err != nil {
		return false, fmt.Errorf("s3: versioning of %s: %w", bucket, err)
	}
	return out.Status == types.BucketVersioningStatusEnabled, nil
}

// Object is one listed object.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// List lists the objects under a prefix, in key order.
func (c *Client) List(ctx context.Context, bucket, prefix string) ([]Object, error) {
	var out []Object
	p := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if code(err) == "NoSuchBucket" {
				return nil, fmt.Errorf("s3: list %s: %w", bucket, ErrBucketNotFound)
			}
			return nil, fmt.Errorf("s3: list %s: %w", bucket, err)
		}
		for _, o := range page.Contents {
			out = append(out, Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Usage is the bytes and the number of objects in a bucket.
func (c *Client) Usage(ctx context.Context, bucket string) (bytes int64, objects int, err error) {
	objs, err := c.List(ctx, bucket, "")
	if err != nil {
		return 0, 0, err
	}
	for _, o := range objs {
		bytes += o.Size
	}
	return bytes, len(objs), nil
}

// IsEmpty tells whether a bucket holds no object.
func (c *Client) IsEmpty(ctx context.Context, bucket string) (bool, error) {
	out, err := c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(1)})
	if err != nil {
		return false, fmt.Errorf("s3: list %s: %w", bucket, err)
	}
	return len(out.Contents) == 0, nil
}

// Put uploads an object of a known size.
func (c *Client) Put(ctx context.Context, bucket, key string, body io.Reader, size int64) error {
	_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: body,
		ContentLength: aws.Int64(size)})
	if err != nil {
		return fmt.Errorf("s3: put %s/%s: %w", bucket, key, err)
	}
	return nil
}

// PutStream uploads what r yields, of a size not known ahead: it is spooled to a file in
// tmpDir first (S3 wants the length). It returns the size.
func (c *Client) PutStream(ctx context.Context, bucket, key string, r io.Reader, tmpDir string) (int64, error) {
	f, err := os.CreateTemp(tmpDir, "s3-upload-*")
	if err != nil {
		return 0, fmt.Errorf("s3: spool: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, r)
	if err != nil {
		return n, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return n, err
	}
	return n, c.Put(ctx, bucket, key, f, n)
}

// Get opens an object.
func (c *Client) Get(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("s3: get %s/%s: %w", bucket, key, err)
	}
	return out.Body, nil
}

// Delete deletes an object; a missing one is no error.
func (c *Client) Delete(ctx context.Context, bucket, key string) error {
	_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil && code(err) != "NoSuchKey" {
		return fmt.Errorf("s3: delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Empty deletes every object (and every version) in a bucket.
func (c *Client) Empty(ctx context.Context, bucket string) error {
	p := s3.NewListObjectVersionsPaginator(c.s3, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			break // versioning never enabled: the plain listing below does it
		}
		for _, v := range page.Versions {
			if _, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: v.Key, VersionId: v.VersionId}); err != nil && code(err) != "NoSuchKey" && code(err) != "NoSuchVersion" {
				return fmt.Errorf("s3: delete %s/%s: %w", bucket, aws.ToString(v.Key), err)
			}
		}
		for _, m := range page.DeleteMarkers {
			_, _ = c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: m.Key, VersionId: m.VersionId})
		}
	}
	objs, err := c.List(ctx, bucket, "")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Delete(ctx, bucket, o.Key); err != nil {
			return err
		}
	}
	return nil
}

// DeleteBucket deletes an empty bucket; ErrBucketNotEmpty if it is not, none if it is gone.
func (c *Client) DeleteBucket(ctx context.Context, bucket string) error {
	_, err := c.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	switch code(err) {
	case "":
		if err != nil {
			return fmt.Errorf("s3: delete bucket %s: %w", bucket, err)
		}
		return nil
	case "NoSuchBucket":
		return nil
	case "BucketNotEmpty":
		return fmt.Errorf("s3: delete bucket %s: %w", bucket, ErrBucketNotEmpty)
	}
	return fmt.Errorf("s3: delete bucket %s: %w", bucket, err)
}
