package registry

import (
	"context"
	"reflect"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/storage"
)

// Kind defines one resource.
type Kind struct {
	Group, Version string
	// Kind and ListKind are the object kinds, e.g. ConfigMap and ConfigMapList.
	Kind, ListKind string
	// Resource is the plural resource name, Singular its singular.
	Resource, Singular     string
	ShortNames, Categories []string
	Namespaced             bool
	// Verbs the resource supports; nil means every verb.
	Verbs []string
	// Status says the resource has a status subresource: writes to the main resource
	// ignore status and writes to status ignore everything else (but metadata, see
	// StatusWritesMetadata).
	Status bool
	// StatusWritesMetadata says a write of the status subresource also writes the request's
	// metadata (labels, annotations, ...; server-owned fields stay), as kube-apiserver's
	// status strategies that do not reset object meta (Namespace's) do. Kinds whose
	// strategy is a ContextStrategy (upstream's REST strategies) always get the request's
	// metadata: their status strategy decides what to keep.
	StatusWritesMetadata bool
	// Scale, when set, gives the resource a scale subresource.
	Scale *Scale
	// NewTyped returns an empty typed Go object for built-in kinds (nil for custom
	// resources). The handlers use it to decode protobuf bodies and as the schema of
	// strategic merge patches.
	NewTyped func() runtime.Object
	// NewTypedList returns an empty typed list (e.g. *corev1.ConfigMapList) for built-in
	// kinds, nil for custom resources.
	NewTypedList func() runtime.Object
	// Columns printed in Table output after Name; Age is always last. TableColumns gives
	// the complete list.
	Columns []Column
	// TableRows, when set, renders the Table itself (column definitions and one row of
	// cells per object) and Columns are not used: built-in kinds print with upstream's own
	// printers.
	TableRows func(objs []*unstructured.Unstructured) ([]metav1.TableColumnDefinition, [][]any, error)
	// ColumnsFunc, when Columns is nil, gives them on first use (it should memoise): a
	// custom resource's columns cost nothing until a table of it is printed.
	ColumnsFunc func() []Column
	// FullColumns says Columns is the complete list: no Name or Age is added. Kinds whose
	// upstream printer has no Age column (roles, events, CRDs) or prints it before wide
	// columns (role bindings) use it.
	FullColumns bool
	// Attrs returns labels and selectable fields; nil means storage.DefaultAttrs.
	Attrs storage.AttrFunc
	// Strategy prepares and validates objects; nil means DefaultStrategy.
	Strategy Strategy
	// Schema is the OpenAPI schema of the object, for discovery of fields (explain) and
	// field validation. May be nil. Use OpenAPISchema, which also consults SchemaFunc.
	Schema *spec.Schema
	// SchemaFunc computes the schema on first use when Schema is nil (built-in kinds: their
	// schemas $ref the definitions in Definitions, which are costly to build at start).
	SchemaFunc func() *spec.Schema
	// SchemaV2Func, when set, is the schema the Swagger 2.0 document (/openapi/v2) publishes
	// instead, as kube-apiserver publishes custom resources there: without what kubectl's v2
	// reader cannot cope with. bare says to publish it as it is, without the apiVersion,
	// kind and metadata properties every other definition gets (a schema that preserves
	// unknown fields at its root is a plain object in v2).
	SchemaV2Func func() (s *spec.Schema, bare bool)
	// SchemaName is the definition name in OpenAPI v2, e.g. io.k8s.api.core.v1.ConfigMap.
	SchemaName string

	// StorageVersion is the version objects are stored in; "" means Version. Every served
	// version of a resource shares its storage keys, so objects read from storage may be in
	// another version than the one a request names.
	StorageVersion string
	// StorageGroup, when set, is the group whose storage the resource shares (its keys are
	// under that group's prefix): events.k8s.io Events are stored with core Events, as
	// kube-apiserver stores them. FromStorage and ToStorage convert. "" means Group.
	StorageGroup string
	// FromStorage, when set, turns objects as stored into objects of this Kind's version:
	// conversion (CRD webhook or apiVersion rewrite), defaulting on read, pruning. The
	// objects it is given may be shared (watch cache) and must not be changed: it returns
	// new objects for those it changes. nil: objects are served as stored.
	FromStorage func(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
	// ToStorage, when set, turns a validated object of this Kind's version into the storage
	// version. nil: stored as is. When it returns obj itself, obj is already what FromStorage
	// would make of it once stored (no conversion; defaulted and pruned), so a create returns
	// it as written without calling FromStorage.
	ToStorage func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Generation says metadata.generation is maintained (set to 1 on create, incremented on
	// every change outside metadata and status), as for custom resources and kinds with a
	// spec. Kinds without it (ConfigMap, Secret, ...) carry no generation, as upstream.
	Generation bool
	// DeprecationWarning, when set, is sent as a Warning header (299) with the response to
	// every request to this kind's version, subresources included: a custom resource version
	// marked deprecated gets its deprecationWarning or upstream's default text.
	DeprecationWarning string

	// Create, when set, makes the kind computed rather than stored: a create calls it with
	// the decoded, type-checked request object and answers 201 with what it returns; nothing
	// is persisted and no other verb is served. Access reviews (SelfSubjectAccessReview, ...),
	// SelfSubjectReview and TokenReview are such kinds. An error may be an API status error.
	Create func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Read, when set, makes the kind's reads computed: get and list answer what it returns
	// and nothing is read from or written to storage; Verbs should then be get and list.
	// ComponentStatus is such a kind (upstream probes the control plane's parts on every
	// read). Set it before the kind is served; without it the kind would be read from
	// storage.
	Read ComputedReader
	// Subresources are create-only subresources computed by a hook (serviceaccounts/token),
	// by subresource name. The status, scale and finalize subresources are not listed here.
	Subresources map[string]*Subresource
	// Connect names the kind's connect subresources (pods: log, exec, attach, portforward,
	// proxy; nodes and services: proxy). The REST handler hands requests to them, whatever
	// their verb and however long their path, to its Connect handler.
	Connect []string
	// FieldSubresources are subresources that, like status, read the whole object and
	// write only some of its fields (pods/ephemeralcontainers, pods/resize,
	// certificatesigningrequests/approval), by name.
	FieldSubresources map[string]*FieldSubresource
	// Allocator, when set, reserves what the kind's objects hold outside storage (a
	// Service's cluster IPs and node ports) around creates, updates and deletes.
	Allocator Allocator
	// IndexedFields are selectable fields (keys of Attrs' fields) the watch cache indexes:
	// a list or watch with a field selector requiring one of them to equal a value reads
	// only the objects with that value, and a change reaches only the watchers of its old
	// and new values. Pods index spec.nodeName (5,000 node agents each watching their own
	// pods), as kube-apiserver's pod storage does. [watch-cache index]
	IndexedFields []string

	// derived holds what Derived caches.
	derived sync.Map
}

// ComputedReader computes the objects of a kind whose reads are computed (Kind.Read).
type ComputedReader interface {
	// Get returns the object name; one that does not exist is an API NotFound error.
	Get(ctx context.Context, name string) (*unstructured.Unstructured, error)
	// List returns every object, in the order they are listed.
	List(ctx context.Context) ([]*unstructured.Unstructured, error)
}

// Subresource is a create-only subresource whose request and response objects are of
// another kind than the parent (e.g. serviceaccounts/token takes and returns an
// authentication.k8s.io/v1 TokenRequest).
type Subresource struct {
	// Group, Version and Kind of the request and response object.
	Group, Version, Kind string
	// NewTyped returns an empty Go object of the kind, for strict field checks.
	NewTyped func() runtime.Object
	// Create computes the response for the parent object namespace/name.
	Create func(ctx context.Context, namespace, name string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// FieldSubresource is a subresource whose writes replace only some fields of the stored
// object; its reads return the whole object.
type FieldSubresource struct {
	// Fields are the paths of the fields the subresource writes (e.g. {"spec",
	// "ephemeralContainers"}); every other field keeps its stored value.
	Fields [][]string
	// Prepare, when set, adjusts the object after the fields were copied (old is the
	// stored object).
	Prepare func(obj, old *unstructured.Unstructured)
}

// Allocator reserves what objects of a kind hold outside storage, as upstream's service
// REST storage allocates cluster IPs and node ports. Begin* run after mutating admission
// and before validation (so validation sees what was allocated, as upstream's BeginCreate
// hook); they may change obj. The finish function they return is called exactly once, with
// whether the write was stored: on false it must release what Begin reserved (on an update,
// what the new object holds and the old did not; on true, what the old held and the new
// does not). An update's Begin may run several times for one request (a conflicting write
// retries it), each run with its own finish. A dry run must reserve nothing.
type Allocator interface {
	BeginCreate(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (finish func(ctx context.Context, stored bool), err error)
	BeginUpdate(ctx context.Context, obj, old *unstructured.Unstructured, dryRun bool) (finish func(ctx context.Context, stored bool), err error)
	// AfterDelete releases what a deleted object held.
	AfterDelete(ctx context.Context, obj *unstructured.Unstructured)
}

// FieldChecker is implemented by strategies that can list the unknown and duplicate fields
// of a request body themselves (custom resources, from their schema); built-in kinds are
// checked against their Go types.
type FieldChecker interface {
	// UnknownFields returns one error per unknown or duplicate field, with its path.
	UnknownFields(data []byte) []error
}

// UnknownFieldPruner is implemented by strategies that can find the unknown fields of a body
// already decoded (custom resources): the create and update handlers then decode a body
// once instead of twice.
type UnknownFieldPruner interface {
	// PruneUnknownFields drops the unknown fields of obj, a decoded request body, and returns
	// one error per field dropped, with its path, as FieldChecker.UnknownFields would for the
	// body. Dropping them early changes nothing the strategy would not drop anyway.
	PruneUnknownFields(obj map[string]any) []error
}

// Scale locates the fields the scale subresource reads and writes.
type Scale struct {
	SpecReplicasPath, StatusReplicasPath, LabelSelectorPath string
	// Selector, when set, computes status.selector of the Scale instead of
	// LabelSelectorPath (built-in kinds: their spec.selector as a selector string).
	Selector func(obj *unstructured.Unstructured) string
}

// Column is one Table column.
type Column struct {
	Name, Type, Format, Description string
	Priority                        int32
	// Cell computes the cell of one object.
	Cell func(obj *unstructured.Unstructured) any
	// CellAt, when set, is used instead of Cell: for cells relative to the time of the
	// request (ages, "last seen").
	CellAt func(obj *unstructured.Unstructured, now time.Time) any
}

// Value computes the cell of obj at time now.
func (c *Column) Value(obj *unstructured.Unstructured, now time.Time) any {
	switch {
	case c.CellAt != nil:
		return c.CellAt(obj, now)
	case c.Cell != nil:
		return c.Cell(obj)
	}
	return nil
}

// Strategy is the per-kind part of create and update.
type Strategy interface {
	// PrepareForCreate adjusts a new object before validation (e.g. clears status).
	PrepareForCreate(obj *unstructured.Unstructured)
	// PrepareForUpdate adjusts an updated object given the stored one.
	PrepareForUpdate(obj, old *unstructured.Unstructured)
	// Validate checks a new object.
	Validate(obj *unstructured.Unstructured) field.ErrorList
	// ValidateUpdate checks an update.
	ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList
}

// ContextStrategy is implemented by strategies that prepare and validate an object in one
// step with the request's context, after mutating admission, as upstream's REST strategies
// do (a CertificateSigningRequest takes its requester from the context; a Pod's
// PrepareForCreate resets its status). When a kind's strategy implements it, the handler calls
// it instead of Validate, ValidateUpdate and ValidateStatusUpdate; it may change obj, and the
// error it returns (an API status error, normally 422 Invalid) is the answer. ctx carries
// the request's user, request.Info and warning sink.
type ContextStrategy interface {
	Strategy
	ValidateCreateContext(ctx context.Context, obj *unstructured.Unstructured) error
	// ValidateUpdateContext checks a write of the object (subresource "") or of one of its
	// subresources (status, or a FieldSubresources name).
	ValidateUpdateContext(ctx context.Context, obj, old *unstructured.Unstructured, subresource string) error
}

// TypedValidator is implemented by strategies that validate an object by decoding it into
// its typed form of obj's version: ValidateTyped and ValidateUpdateTyped find what Validate
// and ValidateUpdate find, and return that typed object too (nil when obj could not be
// decoded), which the handler encodes its protobuf answer from instead of converting the
// content again (Validated.Versioned). The typed object is read-only.
type TypedValidator interface {
	ValidateTyped(obj *unstructured.Unstructured) (runtime.Object, field.ErrorList)
	ValidateUpdateTyped(obj, old *unstructured.Unstructured) (runtime.Object, field.ErrorList)
}

// TypedPreparer is implemented by strategies whose PrepareForCreate and PrepareForUpdate
// convert the object to its typed form (to default it): the Typed variants do the same and
// return the typed object of obj's version that they made obj.Object from, or nil when they
// changed obj after it. The handler hands it to mutating admission, which converts it
// instead of the content while obj.Object is still that map.
type TypedPreparer interface {
	PrepareForCreateTyped(obj *unstructured.Unstructured) runtime.Object
	PrepareForUpdateTyped(obj, old *unstructured.Unstructured) runtime.Object
}

// Validated carries, through a write's validation context, the typed forms of the object
// that the steps of one write made, so that the next step does not convert the content
// again. Content is the map they stand for: the forms stand for obj only while obj.Object is
// that same map and nothing changed it in place (the handler drops them where a step changes
// an object in place, as an allocator does). All forms are read-only but for Object, which
// the step it is handed to owns.
//
// On entry to a ContextStrategy's validation it may hold what mutating admission left:
// Object, the internal form the built-in plugins mutated (defaulted before them, as the
// request body was); a strategy may validate that instead of decoding obj when Content is
// obj.Object. On return the strategy fills it with what validation made: Object and Old,
// upstream's internal forms of the object and the stored object, for validating admission;
// Versioned, the typed object of obj's version that Content was converted from, for the
// response's protobuf encoding.
type Validated struct {
	Content     map[string]any
	Object, Old runtime.Object
	Versioned   runtime.Object
}

// For says whether v stands for content (the same map, not an equal one).
func (v *Validated) For(content map[string]any) bool {
	return v != nil && SameMap(v.Content, content)
}

// SameMap says whether a and b are the same map (not equal maps).
func SameMap(a, b map[string]any) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

type validatedKey struct{}

// WithValidated returns ctx carrying v for a ContextStrategy to fill.
func WithValidated(ctx context.Context, v *Validated) context.Context {
	return context.WithValue(ctx, validatedKey{}, v)
}

// ValidatedFrom is the holder of ctx, or nil.
func ValidatedFrom(ctx context.Context) *Validated {
	v, _ := ctx.Value(validatedKey{}).(*Validated)
	return v
}

// GracefulDeleter is implemented by strategies of kinds whose objects are deleted
// gracefully (pods): a delete first sets deletionTimestamp to now plus the grace period and
// leaves the object for its node to stop; a delete with grace 0 removes it.
type GracefulDeleter interface {
	// GracePeriod returns the grace period a delete of obj gets, given the grace the request
	// asked for (nil: none given).
	GracePeriod(obj *unstructured.Unstructured, requested *int64) int64
}

// StatusValidator is implemented by strategies whose writes to the status subresource are
// checked on their own, as upstream's status strategies do (for a CRD: the status alone,
// not the whole schema with its CEL rules again). Without it, status writes get
// ValidateUpdate.
type StatusValidator interface {
	ValidateStatusUpdate(obj, old *unstructured.Unstructured) field.ErrorList
}

// OpenAPISchema is the schema of the object: Schema, or else SchemaFunc's result (nil if
// neither is set). For built-in kinds it is the OpenAPI v2 definition of the Go type, whose
// $refs ("#/definitions/<name>") point into Definitions.
func (k *Kind) OpenAPISchema() *spec.Schema {
	if k.Schema != nil {
		return k.Schema
	}
	if k.SchemaFunc != nil {
		return k.SchemaFunc()
	}
	return nil
}

// TableColumns is every column of the kind's Table, in order: Name, Columns, Age — or
// Columns alone when FullColumns is set.
func (k *Kind) TableColumns() []Column {
	cols := k.Columns
	if cols == nil && k.ColumnsFunc != nil {
		cols = k.ColumnsFunc()
	}
	if k.FullColumns {
		return cols
	}
	out := make([]Column, 0, len(cols)+2)
	out = append(out, NameColumn())
	out = append(out, cols...)
	return append(out, AgeColumn())
}

// GroupVersion of the kind.
func (k *Kind) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: k.Group, Version: k.Version}
}

// GVK of objects of the kind.
func (k *Kind) GVK() schema.GroupVersionKind { return k.GroupVersion().WithKind(k.Kind) }

// GVR of the resource.
func (k *Kind) GVR() schema.GroupVersionResource {
	return k.GroupVersion().WithResource(k.Resource)
}

// APIVersion as written in objects: "v1" or "group/version".
func (k *Kind) APIVersion() string { return k.GroupVersion().String() }

// Prefix is the storage key prefix of the resource.
func (k *Kind) Prefix() string { return storage.ResourcePrefix(k.storageGroup(), k.Resource) }

func (k *Kind) storageGroup() string {
	if k.StorageGroup != "" {
		if k.StorageGroup == CoreGroup {
			return ""
		}
		return k.StorageGroup
	}
	return k.Group
}

// NamespacePrefix is the storage prefix of the resource's objects in namespace.
func (k *Kind) NamespacePrefix(namespace string) string {
	return storage.NamespacePrefix(k.storageGroup(), k.Resource, namespace)
}

// CoreGroup names the core ("") group in Kind.StorageGroup.
const CoreGroup = "core"

// Key is the storage key of one object.
func (k *Kind) Key(namespace, name string) string {
	return storage.Key(k.storageGroup(), k.Resource, namespace, name)
}

// AllVerbs is what a resource supports unless its Kind narrows it.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// VerbList is the verbs the resource supports.
func (k *Kind) VerbList() []string {
	if k.Verbs != nil {
		return k.Verbs
	}
	return AllVerbs
}

// Supports reports whether the resource allows verb.
func (k *Kind) Supports(verb string) bool {
	for _, v := range k.VerbList() {
		if v == verb {
			return true
		}
	}
	return false
}

// AttrFunc is the kind's selectable fields function.
func (k *Kind) AttrFunc() storage.AttrFunc {
	if k.Attrs != nil {
		return k.Attrs
	}
	return storage.DefaultAttrs
}

// StrategyOrDefault is the kind's strategy.
func (k *Kind) StrategyOrDefault() Strategy {
	if k.Strategy != nil {
		return k.Strategy
	}
	return DefaultStrategy{}
}

// DefaultStrategy validates only object metadata, which every kind shares.
type DefaultStrategy struct{}

func (DefaultStrategy) PrepareForCreate(*unstructured.Unstructured)                    {}
func (DefaultStrategy) PrepareForUpdate(_, _ *unstructured.Unstructured)               {}
func (DefaultStrategy) Validate(*unstructured.Unstructured) field.ErrorList            { return nil }
func (DefaultStrategy) ValidateUpdate(_, _ *unstructured.Unstructured) field.ErrorList { return nil }

// SubresourceInfo describes a subresource in discovery.
type SubresourceInfo struct {
	Name string
	// Group, Version and Kind of its objects ("" group and version: the parent's).
	Group, Version, Kind string
	Verbs                []string
}

// connectVerbs and connectKinds are kube-apiserver's discovery of the connect subresources.
var (
	connectVerbs = map[string][]string{"proxy": {"create", "delete", "get", "patch", "update"}, "log": {"get"}}
	connectKinds = map[string]string{"exec": "PodExecOptions", "attach": "PodAttachOptions", "portforward": "PodPortForwardOptions", "log": "Pod"}
)

// ExtraSubresources are the subresources besides status and scale, sorted by name: the
// computed ones (Subresources), the field subresources and the connect subresources.
func (k *Kind) ExtraSubresources() []SubresourceInfo {
	var out []SubresourceInfo
	for name, sr := range k.Subresources {
		out = append(out, SubresourceInfo{Name: name, Group: sr.Group, Version: sr.Version, Kind: sr.Kind, Verbs: []string{"create"}})
	}
	for name := range k.FieldSubresources {
		out = append(out, SubresourceInfo{Name: name, Kind: k.Kind, Verbs: []string{"get", "patch", "update"}})
	}
	for _, name := range k.Connect {
		verbs, ok := connectVerbs[name]
		if !ok {
			verbs = []string{"create", "get"}
		}
		kind, ok := connectKinds[name]
		if !ok { // proxy
			kind = k.Kind + "ProxyOptions"
		}
		out = append(out, SubresourceInfo{Name: name, Group: "", Version: "v1", Kind: kind, Verbs: verbs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
