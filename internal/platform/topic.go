package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/backup"
	"kubeos.dev/kube/internal/dataservices/nats"
	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
	"kubeos.dev/kube/pkg/lifecycle"
)

// registerTopic registers the Topic kind (NATS JetStream streams).
func registerTopic(e *lifecycle.Engine, o Options) error {
	d := &topicDriver{o: o, pool: &natsPool{clients: map[string]*nats.Client{}}}
	return RegisterData(e, o, lifecycle.KindOptions[*v1alpha1.Topic]{Kind: "Topic",
		New: func() *v1alpha1.Topic { return &v1alpha1.Topic{} }, Driver: d,
		MaxConcurrentReconciles: 8, PeriodicRequeue: time.Minute})
}

func init() { kindValidators["Topic"] = validateTopic }

// TopicSubjectPrefix is the prefix every subject of a Topic in a namespace of tenant lies
// under (the namespace's when it belongs to no tenant).
func TopicSubjectPrefix(tenant, namespace string) string {
	if tenant == "" {
		return namespace + "."
	}
	return tenant + "."
}

// topicSubjects are a Topic's subjects, by default <prefix><namespace>.<name>.>.
func topicSubjects(t *v1alpha1.Topic, tenant string) []string {
	if len(t.Spec.Subjects) > 0 {
		return t.Spec.Subjects
	}
	return []string{TopicSubjectPrefix(tenant, t.Namespace) + t.Namespace + "." + strings.ReplaceAll(t.Name, ".", "_") + ".>"}
}

// validateTopic refuses what JetStream would: subjects outside the tenant's prefix or not
// well-formed, an unknown retention or storage, a storage change, replicas below 1.
func validateTopic(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	var t, o v1alpha1.Topic
	if err := decodeKind(obj, &t); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	info := AdmissionContext(ctx)
	prefix := TopicSubjectPrefix(info.Tenant, obj.GetNamespace())
	p := field.NewPath("spec")
	var errs field.ErrorList
	for i, s := range t.Spec.Subjects {
		if msg := subjectProblem(s, prefix); msg != "" {
			errs = append(errs, field.Invalid(p.Child("subjects").Index(i), s, msg))
		}
	}
	if _, err := nats.StreamConfig(topicSpec(&t, []string{"x"})); err != nil {
		errs = append(errs, field.Invalid(p, nil, err.Error()))
	}
	if t.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(p.Child("replicas"), t.Spec.Replicas, "must be at least 1 (JetStream keeps at least one replica)"))
	}
	if t.Spec.MaxBytes < 0 {
		errs = append(errs, field.Invalid(p.Child("maxBytes"), t.Spec.MaxBytes, "must not be negative"))
	}
	errs = append(errs, validateRestore(ctx, info, p.Child("restoreFrom"), t.Spec.RestoreFrom, "Topic")...)
	if old != nil {
		if err := decodeKind(old, &o); err == nil {
			if topicStorage(&o) != topicStorage(&t) {
				errs = append(errs, field.Forbidden(p.Child("storage"), fmt.Sprintf("JetStream cannot change a stream's storage (%s to %s): create another Topic", topicStorage(&o), topicStorage(&t))))
			}
		}
	}
	return errs
}

func topicStorage(t *v1alpha1.Topic) string {
	if t.Spec.Storage == "" {
		return v1alpha1.StorageFile
	}
	return t.Spec.Storage
}

// subjectProblem says what is wrong with a Topic subject, "" if nothing.
func subjectProblem(s, prefix string) string {
	if !strings.HasPrefix(s, prefix) || len(s) == len(prefix) {
		return fmt.Sprintf("must lie under the tenant's prefix %q", prefix)
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		switch {
		case tok == "":
			return "has an empty token"
		case strings.ContainsAny(tok, " \t\r\n"):
			return "has white space"
		case tok == ">" && i != len(toks)-1:
			return "\">\" must be the last token"
		case (strings.Contains(tok, "*") || strings.Contains(tok, ">")) && tok != "*" && tok != ">":
			return "a wildcard must be a whole token"
		case i == 0 && (tok == "*" || tok == ">"):
			return fmt.Sprintf("must lie under the tenant's prefix %q", prefix)
		}
	}
	return ""
}

func decodeKind(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func topicSpec(t *v1alpha1.Topic, subjects []string) nats.StreamSpec {
	s := nats.StreamSpec{Name: nats.StreamName(t.Namespace, t.Name), Subjects: subjects, Retention: t.Spec.Retention,
		MaxBytes: t.Spec.MaxBytes, Replicas: int(t.Spec.Replicas), Storage: t.Spec.Storage,
		Description: "Topic " + t.Namespace + "/" + t.Name}
	if t.Spec.MaxAge != nil {
		s.MaxAge = t.Spec.MaxAge.Duration
	}
	return s
}

// natsPool keeps one admin connection per server entry version.
type natsPool struct {
	mu      sync.Mutex
	clients map[string]*nats.Client
}

func (p *natsPool) get(ctx context.Context, e servers.Entry) (*nats.Client, error) {
	key := e.Name + "@" + e.Version
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[key]; c != nil && c.Connected() {
		return c, nil
	}
	for k, c := range p.clients {
		if strings.HasPrefix(k, e.Name+"@") {
			c.Close()
			delete(p.clients, k)
		}
	}
	c, err := nats.Dial(ctx, e.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, errors.Unwrap(err)) // the URL has credentials: not echoed
	}
	p.clients[key] = c
	return c, nil
}

type topicDriver struct {
	o    Options
	pool *natsPool
}

var _ lifecycle.Driver[*v1alpha1.Topic] = (*topicDriver)(nil)

// topicState is what one reconcile resolves.
type topicState struct {
	tenant string
	entry  servers.Entry
	c      *nats.Client
	spec   nats.StreamSpec
	user   string
}

func (d *topicDriver) resolve(ctx context.Context, t *v1alpha1.Topic) (*topicState, error) {
	tenant, err := TenantOf(ctx, d.o.Client, t.Namespace)
	if err != nil {
		return nil, err
	}
	name := t.Spec.Server
	if name == "" && t.Status.Server != "" && t.DeletionTimestamp != nil {
		name = t.Status.Server
	}
	e, err := d.o.Servers.Resolve(ctx, servers.NATS, name, tenant)
	if err != nil {
		return nil, err
	}
	c, err := d.pool.get(ctx, e)
	if err != nil {
		return nil, err
	}
	spec := topicSpec(t, topicSubjects(t, tenant))
	return &topicState{tenant: tenant, entry: e, c: c, spec: spec, user: spec.Name}, nil
}

// Observe reads the stream, the user and the connection Secret.
func (d *topicDriver) Observe(ctx context.Context, t *v1alpha1.Topic) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, t)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	t.Status.Server = st.entry.Name
	info, err := st.c.StreamInfo(ctx, st.spec.Name)
	if errors.Is(err, nats.ErrStreamNotFound) {
		return lifecycle.Outcome{}, nil
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	t.Status.Stream = st.spec.Name
	t.Status.Messages, t.Status.Bytes, t.Status.Consumers = int64(info.Messages), int64(info.Bytes), int64(info.Consumers)
	want, _ := nats.StreamConfig(st.spec)
	up := slices.Equal(info.Config.Subjects, want.Subjects) && info.Config.Retention == want.Retention &&
		info.Config.MaxAge == want.MaxAge && info.Config.MaxBytes == want.MaxBytes &&
		info.Config.Replicas == want.Replicas && info.Config.Storage == want.Storage
	if up {
		up, err = d.userCurrent(ctx, st, t)
		if err != nil {
			return lifecycle.Outcome{}, err
		}
	}
	return lifecycle.Outcome{Exists: true, UpToDate: up}, nil
}

func (d *topicDriver) userCurrent(ctx context.Context, st *topicState, t *v1alpha1.Topic) (bool, error) {
	rec, ok, err := st.c.User(ctx, st.user)
	if err != nil || !ok {
		return false, err
	}
	pub, sub := nats.UserPermissions(st.user, st.spec.Name, st.spec.Subjects)
	if !slices.Equal(rec.Publish, pub) || !slices.Equal(rec.Subscribe, sub) {
		return false, nil
	}
	var s corev1.Secret
	err = d.o.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: v1alpha1.ConnectionSecretName(t.Name, "Topic")}, &s)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return nats.HashPassword(string(s.Data["password"])) == rec.PasswordSHA256, nil
}

// Provision creates the stream (restoring it from a Backup when asked), the user and the
// connection Secret. A stream that was there before (status.stream set) and is gone was
// deleted behind the platform's back: it is recreated and the reason says so.
func (d *topicDriver) Provision(ctx context.Context, t *v1alpha1.Topic) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, t)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	recreated := t.Status.Stream != ""
	var out lifecycle.Outcome
	if rf := t.Spec.RestoreFrom; rf != nil && !recreated {
		n, err := d.restore(ctx, st, t, rf)
		if err != nil {
			_ = st.c.DeleteStream(ctx, st.spec.Name) // a partial restore is not kept: the next try starts clean
			return lifecycle.Outcome{}, err
		}
		out = lifecycle.Outcome{Reason: "StreamRestored", Message: fmt.Sprintf("stream %s restored with %d messages from backup %s", st.spec.Name, n, rf.Backup)}
	} else {
		if _, err := st.c.EnsureStream(ctx, st.spec); err != nil {
			return lifecycle.Outcome{}, err
		}
		out = lifecycle.Outcome{Reason: "StreamCreated", Message: "stream " + st.spec.Name + " on " + st.entry.Name}
		if recreated {
			out = lifecycle.Outcome{Reason: "StreamRecreated", Message: "stream " + st.spec.Name + " was missing on " + st.entry.Name + " and was created again (its messages are lost)"}
			d.o.Events.Warning(t, out.Reason, "Observe", out.Message)
		}
	}
	if err := d.ensureUser(ctx, st, t); err != nil {
		return lifecycle.Outcome{}, err
	}
	t.Status.Stream = st.spec.Name
	return out, nil
}

func (d *topicDriver) restore(ctx context.Context, st *topicState, t *v1alpha1.Topic, rf *v1alpha1.RestoreFrom) (int, error) {
	kind, rc, err := openBackupArchive(ctx, d.o, t.Namespace, rf.Backup, rf.Archive)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if kind != "Topic" {
		return 0, fmt.Errorf("backup %s is of a %s, not a Topic", rf.Backup, kind)
	}
	return backup.RestoreStream(ctx, st.entry.URL, st.spec.Name, rc, func(ctx context.Context) error {
		_, err := st.c.EnsureStream(ctx, st.spec)
		return err
	})
}

// Update brings the stream's configuration, the user and the Secret to the spec.
func (d *topicDriver) Update(ctx context.Context, t *v1alpha1.Topic) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, t)
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if _, err := st.c.EnsureStream(ctx, st.spec); err != nil {
		var apiErr interface{ Error() string }
		if errors.As(err, &apiErr) && strings.Contains(err.Error(), "can not change") {
			return lifecycle.Outcome{Terminal: err, Reason: "UnsupportedChange"}, nil
		}
		return lifecycle.Outcome{}, err
	}
	if err := d.ensureUser(ctx, st, t); err != nil {
		return lifecycle.Outcome{}, err
	}
	return lifecycle.Outcome{Reason: "StreamUpdated", Message: "stream " + st.spec.Name}, nil
}

// ensureUser writes the Topic's user (keeping the password of its Secret) and the Secret.
func (d *topicDriver) ensureUser(ctx context.Context, st *topicState, t *v1alpha1.Topic) error {
	name := v1alpha1.ConnectionSecretName(t.Name, "Topic")
	var cur corev1.Secret
	err := d.o.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, &cur)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	pw := string(cur.Data["password"])
	if pw == "" {
		pw = nats.RandomPassword()
	}
	pub, sub := nats.UserPermissions(st.user, st.spec.Name, st.spec.Subjects)
	if err := st.c.PutUser(ctx, st.user, pw, pub, sub); err != nil {
		return err
	}
	host, port, err := st.entry.HostPort()
	if err != nil {
		return err
	}
	u := url.URL{Scheme: "nats", User: url.UserPassword(st.user, pw), Host: net.JoinHostPort(host, port)}
	data := map[string][]byte{
		"host": []byte(host), "port": []byte(port), "username": []byte(st.user), "password": []byte(pw),
		"uri": []byte(u.String()), "subjectPrefix": []byte(TopicSubjectPrefix(st.tenant, t.Namespace)),
		"subjects": []byte(strings.Join(st.spec.Subjects, ",")), "stream": []byte(st.spec.Name),
		"inboxPrefix": []byte(nats.InboxPrefix(st.user)),
	}
	t.Status.ConnectionSecret = name
	return writeConnectionSecret(ctx, d.o.Client, t, "Topic", name, data)
}

// Deprovision revokes the user; with deletionPolicy Delete it deletes the stream too.
func (d *topicDriver) Deprovision(ctx context.Context, t *v1alpha1.Topic) (lifecycle.Outcome, error) {
	st, err := d.resolve(ctx, t)
	if servers.IsNotFound(err) {
		return lifecycle.Outcome{Reason: "ServerGone", Message: "the server entry is gone: nothing to remove"}, nil
	}
	if err != nil {
		return lifecycle.Outcome{}, err
	}
	if err := st.c.DeleteUser(ctx, st.user); err != nil {
		return lifecycle.Outcome{}, err
	}
	if t.Spec.DeletionPolicy == v1alpha1.DeletionDelete {
		if err := st.c.DeleteStream(ctx, st.spec.Name); err != nil {
			return lifecycle.Outcome{}, err
		}
		return lifecycle.Outcome{Reason: "StreamDeleted", Message: "stream " + st.spec.Name}, nil
	}
	return lifecycle.Outcome{Reason: "StreamRetained", Message: "stream " + st.spec.Name + " kept; its user is removed"}, nil
}

// NewTopicDriver is the Topic driver on its own (benchmarks run it under a bare reconciler).
func NewTopicDriver(o Options) lifecycle.Driver[*v1alpha1.Topic] {
	return &topicDriver{o: o, pool: &natsPool{clients: map[string]*nats.Client{}}}
}
