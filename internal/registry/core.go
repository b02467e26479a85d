package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits kube-apiserver applies to core objects.
const (
	// maxSecretSize bounds the data of a Secret or ConfigMap (core.MaxSecretSize).
	maxSecretSize = 1 * 1024 * 1024
	// Event field lengths (pkg/apis/core/validation/events.go).
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

const immutableMsg = "field is immutable when `immutable` is set"

// namespaceKind: cluster-scoped; status.phase is Active on create (Terminating on delete,
// see namespaceStrategy); spec.finalizers gets "kubernetes" on create and changes only
// through the finalize subresource; the kubernetes.io/metadata.name label mirrors the name.
func namespaceKind() *Kind {
	k := kindBase("", "v1", "namespaces", "namespace", func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
	k.ShortNames = []string{"ns"}
	k.Verbs = verbsNoDeleteCollection
	k.Status = true
	k.StatusWritesMetadata = true // upstream's namespaceStatusStrategy resets only spec
	k.Columns = []Column{{Name: "Status", Type: "string", Description: "The status of the namespace",
		Cell: func(obj *unstructured.Unstructured) any { return str(obj, "status", "phase") }}}
	k.Attrs = withFields(func(obj *unstructured.Unstructured, f fields.Set) {
		f["status.phase"] = str(obj, "status", "phase")
		f["name"] = obj.GetName() // kube-apiserver keeps this legacy alias of metadata.name
	})
	k.Strategy = namespaceStrategy{&typedStrategy[*corev1.Namespace]{
		name:   nameDNSLabel,
		newObj: func() *corev1.Namespace { return &corev1.Namespace{} },
		prepareCreate: func(obj *unstructured.Unstructured) {
			obj.Object["status"] = map[string]any{"phase": string(corev1.NamespaceActive)}
			fins, _, _ := unstructured.NestedSlice(obj.Object, "spec", "finalizers")
			has := false
			for _, f := range fins {
				has = has || f == string(corev1.FinalizerKubernetes)
			}
			if !has {
				fins = append(fins, string(corev1.FinalizerKubernetes))
				_ = unstructured.SetNestedSlice(obj.Object, fins, "spec", "finalizers")
			}
			setNameLabel(obj)
		},
		prepareUpdate: func(obj, old *unstructured.Unstructured) {
			if fins, ok, _ := unstructured.NestedFieldCopy(old.Object, "spec", "finalizers"); ok {
				_ = unstructured.SetNestedField(obj.Object, fins, "spec", "finalizers")
			} else {
				unstructured.RemoveNestedField(obj.Object, "spec", "finalizers")
			}
			setNameLabel(obj)
		},
		validate: func(ns *corev1.Namespace) field.ErrorList {
			var errs field.ErrorList
			for i, f := range ns.Spec.Finalizers {
				errs = append(errs, validateKubeFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
			}
			return errs
		},
	}}
	return &k
}

// setNameLabel sets kubernetes.io/metadata.name, as kube-apiserver's namespace defaulting does.
func setNameLabel(obj *unstructured.Unstructured) {
	name := obj.GetName()
	if name == "" {
		return
	}
	if l, ok := obj.Object["metadata"].(map[string]any); ok {
		if _, bad := l["labels"]; bad {
			if _, ok := l["labels"].(map[string]any); !ok {
				return // validation reports it
			}
		}
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelMetadataName] = name
	obj.SetLabels(labels)
}

// validateKubeFinalizerName accepts qualified names; a name without a "/" must be one of the
// standard finalizers.
func validateKubeFinalizerName(name string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	if !strings.Contains(name, "/") {
		switch name {
		case string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		default:
			errs = append(errs, field.Invalid(fld, name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

func configMapKind() *Kind {
	k := kindBase("", "v1", "configmaps", "configmap", func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
	k.ShortNames = []string{"cm"}
	k.Namespaced = true
	k.Columns = []Column{{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"],
		Cell: func(obj *unstructured.Unstructured) any { return count(obj, "data") + count(obj, "binaryData") }}}
	k.Strategy = &typedStrategy[*corev1.ConfigMap]{
		namespaced: true,
		name:       nameDNSSubdomain,
		newObj:     func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		validate:   validateConfigMap,
		// Only an immutable configmap restricts its updates.
		oldMatters: func(old *unstructured.Unstructured) bool { return old.Object["immutable"] == true },
		validateUpdate: func(cm, old *corev1.ConfigMap) field.ErrorList {
			var errs field.ErrorList
			if old.Immutable != nil && *old.Immutable {
				if cm.Immutable == nil || !*cm.Immutable {
					errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMsg))
				}
				if !reflect.DeepEqual(cm.Data, old.Data) {
					errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMsg))
				}
				if !reflect.DeepEqual(cm.BinaryData, old.BinaryData) {
					errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableMsg))
				}
			}
			return errs
		},
	}
	return &k
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for key, value := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		size += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		size += len(value)
	}
	if size > maxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxSecretSize))
	}
	return errs
}

// secretKind: type defaults to Opaque and is immutable; stringData is merged into data on
// write (as the v1 conversion does); data values must be base64.
func secretKind() *Kind {
	k := kindBase("", "v1", "secrets", "secret", func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
	k.Namespaced = true
	k.Columns = []Column{
		{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"],
			Cell: func(obj *unstructured.Unstructured) any { return str(obj, "type") }},
		{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"],
			Cell: func(obj *unstructured.Unstructured) any { return count(obj, "data") }},
	}
	k.Attrs = withFields(func(obj *unstructured.Unstructured, f fields.Set) { f["type"] = str(obj, "type") })
	prepare := func(obj *unstructured.Unstructured) {
		if t, ok := obj.Object["type"]; !ok || t == nil || t == "" {
			obj.Object["type"] = string(corev1.SecretTypeOpaque)
		}
		mergeStringData(obj)
	}
	k.Strategy = &typedStrategy[*corev1.Secret]{
		namespaced:    true,
		name:          nameDNSSubdomain,
		newObj:        func() *corev1.Secret { return &corev1.Secret{} },
		prepareCreate: prepare,
		prepareUpdate: func(obj, _ *unstructured.Unstructured) { prepare(obj) },
		validate:      validateSecret,
		validateUpdate: func(s, old *corev1.Secret) field.ErrorList {
			var errs field.ErrorList
			if s.Type != old.Type {
				errs = append(errs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
			}
			if old.Immutable != nil && *old.Immutable {
				if s.Immutable == nil || !*s.Immutable {
					errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMsg))
				}
				if !reflect.DeepEqual(s.Data, old.Data) {
					errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMsg))
				}
			}
			return errs
		},
	}
	return &k
}

// mergeStringData moves stringData into data, base64-encoded, stringData winning. A
// malformed stringData is left in place for validation to report.
func mergeStringData(obj *unstructured.Unstructured) {
	raw, ok := obj.Object["stringData"]
	if !ok {
		return
	}
	if raw == nil {
		delete(obj.Object, "stringData")
		return
	}
	sd, ok := raw.(map[string]any)
	if !ok {
		return
	}
	for _, v := range sd {
		if _, ok := v.(string); !ok {
			return
		}
	}
	data, ok := obj.Object["data"].(map[string]any)
	if !ok {
		if obj.Object["data"] != nil {
			return
		}
		data = map[string]any{}
	}
	for key, v := range sd {
		data[key] = base64.StdEncoding.EncodeToString([]byte(v.(string)))
	}
	if len(data) > 0 {
		obj.Object["data"] = data
	}
	delete(obj.Object, "stringData")
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	size := 0
	for key, value := range s.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(data.Key(key), key, msg))
		}
		size += len(value)
	}
	for key := range s.StringData {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("stringData").Key(key), key, msg))
		}
	}
	if size > maxSecretSize {
		errs = append(errs, field.TooLong(data, "", maxSecretSize))
	}
	redacted := "<secret contents redacted>"
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if s.Type == corev1.SecretTypeDockerConfigJson {
			key = corev1.DockerConfigJsonKey
		}
		b, ok := s.Data[key]
		if !ok {
			errs = append(errs, field.Required(data.Key(key), ""))
			break
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(data.Key(key), redacted, err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(data.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if _, ok := s.Data[key]; !ok {
				errs = append(errs, field.Required(data.Key(key), ""))
			}
		}
	}
	return errs
}

func serviceAccountKind() *Kind {
	k := kindBase("", "v1", "serviceaccounts", "serviceaccount", func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, func() *corev1.ServiceAccountList { return &corev1.ServiceAccountList{} })
	k.ShortNames = []string{"sa"}
	k.Namespaced = true
	k.Columns = []Column{{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"],
		Cell: func(obj *unstructured.Unstructured) any { return count(obj, "secrets") }}}
	k.Strategy = &typedStrategy[*corev1.ServiceAccount]{
		namespaced: true,
		name:       nameDNSSubdomain,
		newObj:     func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
	}
	return &k
}

// eventView is what the event printer shows, read from either Event version.
type eventView struct {
	eventTime, firstTimestamp, lastTimestamp, seriesLast time.Time
	hasSeries                                            bool
	count                                                int64
	typ, reason, kind, name, fieldPath, message          string
	component, host, reportingController, reportingInst  string
	objName                                              string
}

func coreEventView(obj *unstructured.Unstructured) eventView {
	_, hasSeries := obj.Object["series"].(map[string]any)
	return eventView{
		eventTime:           timestamp(obj, "eventTime"),
		firstTimestamp:      timestamp(obj, "firstTimestamp"),
		lastTimestamp:       timestamp(obj, "lastTimestamp"),
		seriesLast:          timestamp(obj, "series", "lastObservedTime"),
		hasSeries:           hasSeries,
		count:               pick(hasSeries, integer(obj, "series", "count"), integer(obj, "count")),
		typ:                 str(obj, "type"),
		reason:              str(obj, "reason"),
		kind:                str(obj, "involvedObject", "kind"),
		name:                str(obj, "involvedObject", "name"),
		fieldPath:           str(obj, "involvedObject", "fieldPath"),
		message:             str(obj, "message"),
		component:           str(obj, "source", "component"),
		host:                str(obj, "source", "host"),
		reportingController: str(obj, "reportingComponent"),
		reportingInst:       str(obj, "reportingInstance"),
		objName:             obj.GetName(),
	}
}

func eventsV1View(obj *unstructured.Unstructured) eventView {
	_, hasSeries := obj.Object["series"].(map[string]any)
	return eventView{
		eventTime:           timestamp(obj, "eventTime"),
		firstTimestamp:      timestamp(obj, "deprecatedFirstTimestamp"),
		lastTimestamp:       timestamp(obj, "deprecatedLastTimestamp"),
		seriesLast:          timestamp(obj, "series", "lastObservedTime"),
		hasSeries:           hasSeries,
		count:               pick(hasSeries, integer(obj, "series", "count"), integer(obj, "deprecatedCount")),
		typ:                 str(obj, "type"),
		reason:              str(obj, "reason"),
		kind:                str(obj, "regarding", "kind"),
		name:                str(obj, "regarding", "name"),
		fieldPath:           str(obj, "regarding", "fieldPath"),
		message:             str(obj, "note"),
		component:           str(obj, "deprecatedSource", "component"),
		host:                str(obj, "deprecatedSource", "host"),
		reportingController: str(obj, "reportingController"),
		reportingInst:       str(obj, "reportingInstance"),
		objName:             obj.GetName(),
	}
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func firstNonEmpty(a, b string) string { return pick(a != "", a, b) }

// eventColumns are kubectl's event columns (printEvent): no Name column first and no Age.
func eventColumns(view func(*unstructured.Unstructured) eventView) []Column {
	doc := corev1.Event{}.SwaggerDoc()
	first := func(e eventView, now time.Time) string {
		if e.firstTimestamp.IsZero() {
			return Since(e.eventTime, now)
		}
		return Since(e.firstTimestamp, now)
	}
	at := func(f func(e eventView, now time.Time) any) func(*unstructured.Unstructured, time.Time) any {
		return func(obj *unstructured.Unstructured, now time.Time) any { return f(view(obj), now) }
	}
	cell := func(f func(e eventView) any) func(*unstructured.Unstructured) any {
		return func(obj *unstructured.Unstructured) any { return f(view(obj)) }
	}
	return []Column{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"], CellAt: at(func(e eventView, now time.Time) any {
			switch {
			case e.hasSeries:
				return Since(e.seriesLast, now)
			case e.lastTimestamp.IsZero():
				return first(e, now)
			}
			return Since(e.lastTimestamp, now)
		})},
		{Name: "Type", Type: "string", Description: doc["type"], Cell: cell(func(e eventView) any { return e.typ })},
		{Name: "Reason", Type: "string", Description: doc["reason"], Cell: cell(func(e eventView) any { return e.reason })},
		{Name: "Object", Type: "string", Description: doc["involvedObject"], Cell: cell(func(e eventView) any {
			if e.name == "" {
				return strings.ToLower(e.kind)
			}
			return fmt.Sprintf("%s/%s", strings.ToLower(e.kind), e.name)
		})},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"],
			Cell: cell(func(e eventView) any { return e.fieldPath })},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"], Cell: cell(func(e eventView) any {
			component, instance := firstNonEmpty(e.component, e.reportingController), firstNonEmpty(e.host, e.reportingInst)
			if instance == "" {
				return component
			}
			return component + ", " + instance
		})},
		{Name: "Message", Type: "string", Description: doc["message"], Cell: cell(func(e eventView) any { return strings.TrimSpace(e.message) })},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"], CellAt: at(func(e eventView, now time.Time) any { return first(e, now) })},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"], Cell: cell(func(e eventView) any {
			if e.count == 0 && !e.hasSeries {
				return int64(1) // singleton events of the new API have no count
			}
			return e.count
		})},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: objectMetaDocs["name"],
			Cell: cell(func(e eventView) any { return e.objName })},
	}
}

func coreEventKind() *Kind {
	k := kindBase("", "v1", "events", "event", func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
	k.ShortNames = []string{"ev"}
	k.Namespaced = true
	k.FullColumns = true
	k.Columns = eventColumns(coreEventView)
	k.Attrs = eventAttrs // shared with events.k8s.io Events (events_storage.go)
	k.Strategy = &typedStrategy[*corev1.Event]{
		namespaced: true,
		name:       nameDNSSubdomain,
		newObj:     func() *corev1.Event { return &corev1.Event{} },
		validate: func(e *corev1.Event) field.ErrorList {
			return validateEventCommon(e.Namespace, e.InvolvedObject.Namespace, e.EventTime.IsZero(),
				"reportingComponent", e.ReportingController, e.ReportingInstance, e.Action, e.Reason, "message", e.Message,
				field.NewPath("involvedObject", "namespace"))
		},
	}
	return &k
}

// validateEventCommon is kube-apiserver's legacyValidateEvent: events without an eventTime
// (old clients) only need a consistent namespace; new-style events need the reporting
// fields.
func validateEventCommon(ns, objNS string, noEventTime bool, controllerField, controller, instance, action, reason, messageField, message string, objNSPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if noEventTime {
		if objNS == "" {
			if ns != metav1.NamespaceNone && ns != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(objNSPath, objNS, "does not match event.namespace"))
			}
		} else if ns != objNS {
			errs = append(errs, field.Invalid(objNSPath, objNS, "does not match event.namespace"))
		}
		return errs
	}
	if objNS == "" && ns != metav1.NamespaceDefault && ns != metav1.NamespaceSystem {
		errs = append(errs, field.Invalid(objNSPath, objNS, "does not match event.namespace"))
	}
	if controller == "" {
		errs = append(errs, field.Required(field.NewPath(controllerField), ""))
	} else {
		for _, msg := range validation.IsQualifiedName(controller) {
			errs = append(errs, field.Invalid(field.NewPath(controllerField), controller, msg))
		}
	}
	limit := func(name, v string, max int, required bool) {
		if required && v == "" {
			errs = append(errs, field.Required(field.NewPath(name), ""))
		}
		if len(v) > max {
			errs = append(errs, field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", max)))
		}
	}
	limit("reportingInstance", instance, reportingInstanceLengthLimit, true)
	limit("action", action, actionLengthLimit, true)
	limit("reason", reason, reasonLengthLimit, true)
	limit(messageField, message, noteLengthLimit, false)
	return errs
}
