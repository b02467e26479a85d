package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/s3"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerBucket registers the Bucket kind (S3 buckets with an access key of their own).
func registerBucket(e *lifecycle.Engine, o Options) error {
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Bucket]{Kind: "Bucket",
		New: func() *v1alpha1.Bucket { return &v1alpha1.Bucket{} }, Driver: &bucketDriver{o: o},
		MaxConcurrentReconciles: 4, PeriodicRequeue: time.Minute})
}

func init() { kindValidators["Bucket"] = validateBucket }

// bucketNameRE is S3's bucket naming rule (3–63 lower-case letters, digits, dots, hyphens;
// a letter or digit at both ends).
var bucketNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// BucketName is a Bucket's name on the store: spec.bucketName, else <namespace>-<name>
// (dots kept; shortened with a hash when longer than 63).
func BucketName(b *v1alpha1.Bucket) string {
	if b.Spec.BucketName != "" {
		return b.Spec.BucketName
	}
	n := b.Namespace + "-" + b.Name
	if len(n) > 63 {
		sum := sha256.Sum256([]byte(n))
		n = strings.TrimRight(n[:54], ".-") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return n
}

// bucketAccessKey is the access key ID of a Bucket's key: stable for the object (its UID).
func bucketAccessKey(b *v1alpha1.Bucket) string {
	sum := sha256.Sum256([]byte(b.UID))
	return "KB" + strings.ToUpper(hex.EncodeToString(sum[:])[:18])
}

// validateBucket refuses a bad or changed bucket name, and a bucket name another tenant's
// Bucket uses.
func validateBucket(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	var b v1alpha1.Bucket
	if err := decodeKind(obj, &b); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	p := field.NewPath("spec", "bucketName")
	name := BucketName(&b)
	var errs field.ErrorList
	if !bucketNameRE.MatchString(name) || strings.Contains(name, "..") {
		errs = append(errs, field.Invalid(p, name, "an S3 bucket name is 3-63 lower-case letters, digits, dots and hyphens, beginning and ending with a letter or digit"))
	}
	if b.Spec.Existing && b.Spec.BucketName == "" {
		errs = append(errs, field.Required(p, "binding an existing bucket needs its name"))
	}
	if old != nil {
		var o v1alpha1.Bucket
		if err := decodeKind(old, &o); err == nil && BucketName(&o) != name {
			errs = append(errs, field.Forbidden(p, "is immutable"))
		}
	}
	if dp := b.Spec.DeletionPolicy; dp != "" && dp != v1alpha1.DeletionRetain && dp != v1alpha1.DeletionDelete && dp != v1alpha1.DeletionDeleteIfEmpty {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "deletionPolicy"), dp, []string{v1alpha1.DeletionRetain, v1alpha1.DeletionDelete, v1alpha1.DeletionDeleteIfEmpty}))
	}
	info := AdmissionContext(ctx)
	if info.Reader != nil && len(errs) == 0 {
		var list v1alpha1.BucketList
		if err := info.Reader.List(ctx, &list); err != nil {
			return append(errs, field.InternalError(p, err))
		}
		for i := range list.Items {
			other := &list.Items[i]
			if other.Namespace == b.Namespace && other.Name == b.Name {
				continue
			}
			if BucketName(other) != name || other.Spec.Server != b.Spec.Server {
				continue
			}
			t, err := TenantOf(ctx, info.Reader, other.Namespace)
			if err != nil {
				return append(errs, field.InternalError(p, err))
			}
			if t != info.Tenant || info.Tenant == "" {
				errs = append(errs, field.Forbidden(p, fmt.Sprintf("bucket %s belongs to another tenant", name)))
			} else if !b.Spec.Existing {
				errs = append(errs, field.Duplicate(p, name))
			}
			break
		}
	}
	return errs
}

type bucketDriver struct {
	o  Options
	mu sync.Mutex
}

var _ lifecycle.Driver[*v1alpha1.Bucket] = (*bucketDriver)(nil)

type bucketState struct {
	entry  servers.Entry
	admin  *s3.Client
	adm    *s3.Admin
	name   string
	access string
}

func (d *bucketDriver) resolve(ctx context.Context, b *v1alpha1.Bucket) (*bucketState, error) {
	tenant, err := TenantOf(ctx, d.o.Client, b.Namespace)
	if err != nil {
		return nil, err
	}
	e, err := d.o.Servers.Resolve(ctx, servers.S3, b.Spec.Server, tenant)
	if err != nil {
		return nil, err
	}
	access, secret, region := string(e.Data[servers.KeyAccessKeyID]), string(e.Data[servers.KeySecretAccessKey]), string(e.Data[servers.KeyRegion])
	return &bucketState{entry: e, admin: s3.NewClient(e.URL, access, secret, region), adm: s3.NewAdmin(e.URL, access, secret, region),
		name: BucketName(b), access: bucketAccessKey(b)}, nil
}

func (d *bucketDriver) secret(ctx context.Context, b *v1alpha1.Bucket) (*corev1.Secret, error) {
	var s corev1.Secret
	err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: v1alpha1.ConnectionSecretName(b.Name, "Bucket")}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return &s, err
}

// Observe finds the bucket, checks its key works on it, its versioning and its Secret, and
// reports its usage.
func (d *bucketDriver) Observe(ctx context.Context, b *v1alpha1.Bucket) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, b)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	b.Status.Server, b.Status.Endpoint = st.entry.Name, st.entry.URL
	ok, err := st.admin.BucketExists(ctx, st.name)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if !ok {
		return lifecycle.Outcome{}, nil
	}
	if b.Status.BucketName == "" && !b.Spec.Existing {
		// There, but not made by this object: binding it needs existing: true.
		return lifecycle.Outcome{Terminal: fmt.Errorf("bucket %s exists on %s and was not created by this Bucket: set spec.existing to bind it", st.name, st.entry.Name), Reason: "BucketExists"}, nil
	}
	if b.Status.BucketName == "" {
		return lifecycle.Outcome{Exists: true}, nil // bound, not set up yet
	}
	usage, _, err := st.admin.Usage(ctx, st.name)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	b.Status.UsageBytes = usage
	up := true
	if v, err := st.admin.Versioning(ctx, st.name); err != nil || v != b.Spec.Versioning {
		up = false
	}
	s, err := d.secret(ctx, b)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if s == nil {
		up = false
	} else {
		key := s3.NewClient(st.entry.URL, string(s.Data["COSI_S3_ACCESS_KEY_ID"]), string(s.Data["COSI_S3_ACCESS_SECRET_KEY"]), string(st.entry.Data[servers.KeyRegion]))
		if _, err := key.IsEmpty(ctx, st.name); err != nil {
			up = false // the key was removed or changed behind the platform's back
		}
	}
	out := lifecycle.Outcome{Exists: true, UpToDate: up}
	if q := b.Spec.QuotaHint; q != nil && usage > q.Value() {
		out.Reason, out.Message = "OverQuotaHint", fmt.Sprintf("bucket %s holds %d bytes, over its quota hint %s", st.name, usage, q.String())
	}
	return out, nil
}

// Provision creates the bucket (or binds an existing one) and its key.
func (d *bucketDriver) Provision(ctx context.Context, b *v1alpha1.Bucket) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, b)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	recreated := b.Status.BucketName != ""
	if b.Spec.Existing {
		return lifecycle.Outcome{Phase: lifecycle.PhaseReconciling, Reason: "BucketMissing", RequeueAfter: 10 * time.Second,
			Message: fmt.Sprintf("bucket %s does not exist on %s (spec.existing: it is not created)", st.name, st.entry.Name)}, nil
	}
	if _, err := st.admin.CreateBucket(ctx, st.name); err != nil {
		return lifecycle.Outcome{}, err
	}
	if err := d.setUp(ctx, st, b); err != nil {
		return lifecycle.Outcome{}, err
	}
	if recreated {
		out := lifecycle.Outcome{Reason: "BucketRecreated", Message: "bucket " + st.name + " was missing on " + st.entry.Name + " and was created again, empty"}
		d.o.Events.Warning(b, out.Reason, "Observe", out.Message)
		return out, nil
	}
	return lifecycle.Outcome{Reason: "BucketCreated", Message: "bucket " + st.name + " on " + st.entry.Name}, nil
}

// Update sets versioning and (re)creates the key and the Secret.
func (d *bucketDriver) Update(ctx context.Context, b *v1alpha1.Bucket) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, b)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	bound := b.Status.BucketName == ""
	if err := d.setUp(ctx, st, b); err != nil {
		return lifecycle.Outcome{}, err
	}
	if bound {
		return lifecycle.Outcome{Reason: "BucketBound", Message: "existing bucket " + st.name + " on " + st.entry.Name}, nil
	}
	return lifecycle.Outcome{Reason: "BucketUpdated", Message: "bucket " + st.name}, nil
}

func (d *bucketDriver) setUp(ctx context.Context, st *bucketState, b *v1alpha1.Bucket) error {
	cur, err := d.secret(ctx, b)
	if err != nil {
		return err
	}
	secret := ""
	if cur != nil && string(cur.Data["COSI_S3_ACCESS_KEY_ID"]) == st.access {
		secret = string(cur.Data["COSI_S3_ACCESS_SECRET_KEY"])
	}
	if secret == "" {
		secret = s3.RandomString(20)
	}
	if err := st.adm.CreateUser(ctx, st.access, secret); err != nil {
		return err
	}
	if err := st.adm.ChangeBucketOwner(ctx, st.name, st.access); err != nil {
		return err
	}
	if v, err := st.admin.Versioning(ctx, st.name); err != nil || v != b.Spec.Versioning {
		if b.Spec.Versioning || v {
			if err := st.admin.SetVersioning(ctx, st.name, b.Spec.Versioning); err != nil {
				return err
			}
		}
	}
	host, port, err := st.entry.HostPort()
	if err != nil {
		return err
	}
	region := string(st.entry.Data[servers.KeyRegion])
	if region == "" {
		region = "us-east-1"
	}
	data := map[string][]byte{
		"host": []byte(host), "port": []byte(port), "username": []byte(st.access), "password": []byte(secret),
		"COSI_S3_ENDPOINT": []byte(st.entry.URL), "COSI_S3_BUCKET_NAME": []byte(st.name),
		"COSI_S3_ACCESS_KEY_ID": []byte(st.access), "COSI_S3_ACCESS_SECRET_KEY": []byte(secret), "COSI_S3_REGION": []byte(region),
	}
	name := v1alpha1.ConnectionSecretName(b.Name, "Bucket")
	if err := writeConnectionSecret(ctx, d.o.Client, b, "Bucket", name, data); err != nil {
		return err
	}
	b.Status.BucketName, b.Status.AccessKeyID, b.Status.ConnectionSecret = st.name, st.access, name
	return nil
}

// Deprovision removes the key; Delete empties and deletes the bucket, DeleteIfEmpty deletes
// it only when it holds nothing (else it stays, said in the reason), Retain keeps it.
func (d *bucketDriver) Deprovision(ctx context.Context, b *v1alpha1.Bucket) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, b)
	if servers.IsNotFound(err) {
		return lifecycle.Outcome{Reason: "ServerGone", Message: "the server entry is gone: nothing to remove"}, nil
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	exists, err := st.admin.BucketExists(ctx, st.name)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if exists && b.Status.BucketName != "" {
		root := string(st.entry.Data[servers.KeyAccessKeyID])
		if err := st.adm.ChangeBucketOwner(ctx, st.name, root); err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	if err := st.adm.DeleteUser(ctx, st.access); err != nil {
		return lifecycle.Outcome{}, err
	}
	out := lifecycle.Outcome{Reason: "BucketRetained", Message: "bucket " + st.name + " kept; its key is removed"}
	if !exists || b.Status.BucketName == "" || b.Spec.Existing && b.Spec.DeletionPolicy != v1alpha1.DeletionDelete {
		return out, nil
	}
	switch b.Spec.DeletionPolicy {
	case v1alpha1.DeletionDelete:
		if err := st.admin.Empty(ctx, st.name); err != nil {
			return lifecycle.Outcome{}, err
		}
		if err := st.admin.DeleteBucket(ctx, st.name); err != nil {
			return lifecycle.Outcome{}, err
		}
		return lifecycle.Outcome{Reason: "BucketDeleted", Message: "bucket " + st.name}, nil
	case v1alpha1.DeletionDeleteIfEmpty:
		empty, err := st.admin.IsEmpty(ctx, st.name)
		if err != nil {
			return lifecycle.Outcome{}, err
		}
		if !empty {
			return lifecycle.Outcome{Reason: "BucketNotEmpty", Message: "bucket " + st.name + " holds objects and is kept (deletionPolicy DeleteIfEmpty)"}, nil
		}
		if err := st.admin.DeleteBucket(ctx, st.name); err != nil {
			return lifecycle.Outcome{}, err
		}
		return lifecycle.Outcome{Reason: "BucketDeleted", Message: "empty bucket " + st.name}, nil
	}
	return out, nil
}
