package workload

import (
	"fmt"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kube-aggregator/pkg/registry/apiservice"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/resolver"
	"k8s.io/kubernetes/pkg/registry/apps/controllerrevision"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/certificates/certificates"
	"k8s.io/kubernetes/pkg/registry/certificates/clustertrustbundle"
	"k8s.io/kubernetes/pkg/registry/certificates/podcertificaterequest"
	"k8s.io/kubernetes/pkg/registry/core/endpoint"
	"k8s.io/kubernetes/pkg/registry/core/limitrange"
	"k8s.io/kubernetes/pkg/registry/core/node"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/podtemplate"
	"k8s.io/kubernetes/pkg/registry/core/replicationcontroller"
	"k8s.io/kubernetes/pkg/registry/core/resourcequota"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/discovery/endpointslice"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/flowschema"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/prioritylevelconfiguration"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/pkg/registry/networking/ipaddress"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/networking/servicecidr"
	"k8s.io/kubernetes/pkg/registry/node/runtimeclass"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/registry/resource/deviceclass"
	"k8s.io/kubernetes/pkg/registry/resource/devicetaintrule"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaim"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaimtemplate"
	"k8s.io/kubernetes/pkg/registry/resource/resourceslice"
	"k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	"k8s.io/kubernetes/pkg/registry/storage/csidriver"
	"k8s.io/kubernetes/pkg/registry/storage/csinode"
	"k8s.io/kubernetes/pkg/registry/storage/csistoragecapacity"
	"k8s.io/kubernetes/pkg/registry/storage/storageclass"
	"k8s.io/kubernetes/pkg/registry/storage/volumeattachment"
	"k8s.io/kubernetes/pkg/registry/storage/volumeattributesclass"
	"k8s.io/kubernetes/pkg/registry/storagemigration/storagemigration"
	"k8s.io/utils/clock"

	"kubeos.dev/kube/internal/registry"
	"kubeos.dev/kube/internal/storage"
)

func init() { registry.RegisterBuiltins(Kinds) }

// upstreamStrategy is what every upstream REST strategy of a stored kind implements.
type upstreamStrategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// def describes one kind: its discovery names as kube-apiserver serves them and the
// upstream strategies behind it.
type def struct {
	group, version, kind string
	resource, singular   string
	short, categories    []string
	namespaced           bool
	strategy             upstreamStrategy
	status               rest.RESTUpdateStrategy
	// fieldSubs are the subresources that write some fields of the object.
	fieldSubs map[string]fieldSub
	// fields are the selectable fields beyond metadata.name and metadata.namespace.
	fields func(obj map[string]any, f fields.Set)
	scale  *registry.Scale
	// connect are the connect subresources (pods/exec, ...).
	connect []string
	// indexed are the selectable fields the watch cache indexes (a pod's spec.nodeName: every
	// node agent watches its own pods).
	indexed []string
	// storageVersion, when set, is the version objects are stored in (another served
	// version of the same kind); objects are converted through the internal type.
	storageVersion string
}

type fieldSub struct {
	strategy rest.RESTUpdateStrategy
	fields   [][]string
}

var all = []string{"all"}

// defs is every workload kind, in kube-apiserver's groups and versions.
func defs() []def {
	return []def{
		// core/v1
		{group: "", version: "v1", kind: "Pod", resource: "pods", singular: "pod", short: []string{"po"}, categories: all, namespaced: true,
			strategy: pod.Strategy, status: pod.StatusStrategy,
			fieldSubs: map[string]fieldSub{
				"ephemeralcontainers": {pod.EphemeralContainersStrategy, [][]string{{"spec", "ephemeralContainers"}}},
				"resize":              {pod.ResizeStrategy, [][]string{{"spec", "containers"}, {"spec", "initContainers"}, {"spec", "resources"}}},
			},
			fields: podFields, indexed: []string{"spec.nodeName"}, connect: []string{"attach", "exec", "log", "portforward", "proxy"}},
		{group: "", version: "v1", kind: "Node", resource: "nodes", singular: "node", short: []string{"no"},
			strategy: node.Strategy, status: node.StatusStrategy, connect: []string{"proxy"},
			fields: func(o map[string]any, f fields.Set) { f["spec.unschedulable"] = boolField(o, "spec", "unschedulable") }},
		{group: "", version: "v1", kind: "Service", resource: "services", singular: "service", short: []string{"svc"}, categories: all, namespaced: true,
			strategy: service.Strategy, status: service.StatusStrategy, connect: []string{"proxy"},
			fields: func(o map[string]any, f fields.Set) {
				f["spec.clusterIP"] = strField(o, "spec", "clusterIP")
				f["spec.type"] = strField(o, "spec", "type")
			}},
		{group: "", version: "v1", kind: "Endpoints", resource: "endpoints", singular: "endpoints", short: []string{"ep"}, namespaced: true, strategy: endpoint.Strategy},
		{group: "", version: "v1", kind: "PersistentVolume", resource: "persistentvolumes", singular: "persistentvolume", short: []string{"pv"},
			strategy: persistentvolume.Strategy, status: persistentvolume.StatusStrategy, fields: nameField},
		{group: "", version: "v1", kind: "PersistentVolumeClaim", resource: "persistentvolumeclaims", singular: "persistentvolumeclaim", short: []string{"pvc"}, namespaced: true,
			strategy: persistentvolumeclaim.Strategy, status: persistentvolumeclaim.StatusStrategy, fields: nameField},
		{group: "", version: "v1", kind: "PodTemplate", resource: "podtemplates", singular: "podtemplate", namespaced: true, strategy: podtemplate.Strategy},
		{group: "", version: "v1", kind: "ReplicationController", resource: "replicationcontrollers", singular: "replicationcontroller", short: []string{"rc"}, categories: all, namespaced: true,
			strategy: replicationcontroller.Strategy, status: replicationcontroller.StatusStrategy,
			fields: func(o map[string]any, f fields.Set) { f["status.replicas"] = intField(o, "status", "replicas") },
			scale:  &registry.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", Selector: mapSelector}},
		{group: "", version: "v1", kind: "LimitRange", resource: "limitranges", singular: "limitrange", short: []string{"limits"}, namespaced: true, strategy: limitrange.Strategy},
		{group: "", version: "v1", kind: "ResourceQuota", resource: "resourcequotas", singular: "resourcequota", short: []string{"quota"}, namespaced: true,
			strategy: resourcequota.Strategy, status: resourcequota.StatusStrategy},

		// apps/v1
		{group: "apps", version: "v1", kind: "Deployment", resource: "deployments", singular: "deployment", short: []string{"deploy"}, categories: all, namespaced: true,
			strategy: deployment.Strategy, status: deployment.StatusStrategy, scale: replicasScale()},
		{group: "apps", version: "v1", kind: "ReplicaSet", resource: "replicasets", singular: "replicaset", short: []string{"rs"}, categories: all, namespaced: true,
			strategy: replicaset.Strategy, status: replicaset.StatusStrategy, scale: replicasScale(),
			fields: func(o map[string]any, f fields.Set) { f["status.replicas"] = intField(o, "status", "replicas") }},
		{group: "apps", version: "v1", kind: "StatefulSet", resource: "statefulsets", singular: "statefulset", short: []string{"sts"}, categories: all, namespaced: true,
			strategy: statefulset.Strategy, status: statefulset.StatusStrategy, scale: replicasScale()},
		{group: "apps", version: "v1", kind: "DaemonSet", resource: "daemonsets", singular: "daemonset", short: []string{"ds"}, categories: all, namespaced: true,
			strategy: daemonset.Strategy, status: daemonset.StatusStrategy},
		{group: "apps", version: "v1", kind: "ControllerRevision", resource: "controllerrevisions", singular: "controllerrevision", namespaced: true, strategy: controllerrevision.Strategy},

		// batch/v1
		{group: "batch", version: "v1", kind: "Job", resource: "jobs", singular: "job", categories: all, namespaced: true,
			strategy: job.Strategy, status: job.StatusStrategy,
			fields: func(o map[string]any, f fields.Set) { f["status.successful"] = intField(o, "status", "succeeded") }},
		{group: "batch", version: "v1", kind: "CronJob", resource: "cronjobs", singular: "cronjob", short: []string{"cj"}, categories: all, namespaced: true,
			strategy: cronjob.Strategy, status: cronjob.StatusStrategy},

		// autoscaling: one stored object (v2) served in v2 and v1.
		{group: "autoscaling", version: "v2", kind: "HorizontalPodAutoscaler", resource: "horizontalpodautoscalers", singular: "horizontalpodautoscaler", short: []string{"hpa"}, categories: all, namespaced: true,
			strategy: horizontalpodautoscaler.Strategy, status: horizontalpodautoscaler.StatusStrategy},
		{group: "autoscaling", version: "v1", kind: "HorizontalPodAutoscaler", resource: "horizontalpodautoscalers", singular: "horizontalpodautoscaler", short: []string{"hpa"}, categories: all, namespaced: true,
			strategy: horizontalpodautoscaler.Strategy, status: horizontalpodautoscaler.StatusStrategy, storageVersion: "v2"},

		// policy/v1
		{group: "policy", version: "v1", kind: "PodDisruptionBudget", resource: "poddisruptionbudgets", singular: "poddisruptionbudget", short: []string{"pdb"}, namespaced: true,
			strategy: poddisruptionbudget.Strategy, status: poddisruptionbudget.StatusStrategy},

		// discovery.k8s.io/v1
		{group: "discovery.k8s.io", version: "v1", kind: "EndpointSlice", resource: "endpointslices", singular: "endpointslice", namespaced: true, strategy: endpointslice.Strategy},

		// networking.k8s.io/v1
		{group: "networking.k8s.io", version: "v1", kind: "NetworkPolicy", resource: "networkpolicies", singular: "networkpolicy", short: []string{"netpol"}, namespaced: true, strategy: networkpolicy.Strategy},
		{group: "networking.k8s.io", version: "v1", kind: "Ingress", resource: "ingresses", singular: "ingress", short: []string{"ing"}, namespaced: true,
			strategy: ingress.Strategy, status: ingress.StatusStrategy},
		{group: "networking.k8s.io", version: "v1", kind: "IngressClass", resource: "ingressclasses", singular: "ingressclass", strategy: ingressclass.Strategy},
		{group: "networking.k8s.io", version: "v1", kind: "ServiceCIDR", resource: "servicecidrs", singular: "servicecidr",
			strategy: servicecidr.Strategy, status: servicecidr.StatusStrategy},
		{group: "networking.k8s.io", version: "v1", kind: "IPAddress", resource: "ipaddresses", singular: "ipaddress", short: []string{"ip"}, strategy: ipaddress.Strategy},

		// storage.k8s.io/v1
		{group: "storage.k8s.io", version: "v1", kind: "StorageClass", resource: "storageclasses", singular: "storageclass", short: []string{"sc"}, strategy: storageclass.Strategy},
		{group: "storage.k8s.io", version: "v1", kind: "CSIDriver", resource: "csidrivers", singular: "csidriver", strategy: csidriver.Strategy},
		{group: "storage.k8s.io", version: "v1", kind: "CSINode", resource: "csinodes", singular: "csinode", strategy: csinode.Strategy},
		{group: "storage.k8s.io", version: "v1", kind: "CSIStorageCapacity", resource: "csistoragecapacities", singular: "csistoragecapacity", namespaced: true, strategy: csistoragecapacity.Strategy},
		{group: "storage.k8s.io", version: "v1", kind: "VolumeAttachment", resource: "volumeattachments", singular: "volumeattachment",
			strategy: volumeattachment.Strategy, status: volumeattachment.StatusStrategy},
		{group: "storage.k8s.io", version: "v1", kind: "VolumeAttributesClass", resource: "volumeattributesclasses", singular: "volumeattributesclass", short: []string{"vac"}, strategy: volumeattributesclass.Strategy},

		// scheduling.k8s.io/v1, node.k8s.io/v1
		{group: "scheduling.k8s.io", version: "v1", kind: "PriorityClass", resource: "priorityclasses", singular: "priorityclass", short: []string{"pc"}, strategy: priorityclass.Strategy},
		{group: "node.k8s.io", version: "v1", kind: "RuntimeClass", resource: "runtimeclasses", singular: "runtimeclass", strategy: runtimeclass.Strategy},

		// resource.k8s.io/v1
		{group: "resource.k8s.io", version: "v1", kind: "DeviceClass", resource: "deviceclasses", singular: "deviceclass", strategy: deviceclass.Strategy},
		{group: "resource.k8s.io", version: "v1", kind: "ResourceClaim", resource: "resourceclaims", singular: "resourceclaim", namespaced: true,
			strategy: claimStrategy, status: resourceclaim.NewStatusStrategy(claimStrategy)},
		{group: "resource.k8s.io", version: "v1", kind: "ResourceClaimTemplate", resource: "resourceclaimtemplates", singular: "resourceclaimtemplate", namespaced: true,
			strategy: resourceclaimtemplate.NewStrategy(namespaces)},
		{group: "resource.k8s.io", version: "v1", kind: "ResourceSlice", resource: "resourceslices", singular: "resourceslice", strategy: resourceslice.Strategy,
			fields: func(o map[string]any, f fields.Set) {
				f["spec.nodeName"] = strField(o, "spec", "nodeName")
				f["spec.driver"] = strField(o, "spec", "driver")
				f["spec.pool.name"] = strField(o, "spec", "pool", "name")
			}},

		{group: "resource.k8s.io", version: "v1", kind: "DeviceTaintRule", resource: "devicetaintrules", singular: "devicetaintrule",
			strategy: devicetaintrule.Strategy, status: devicetaintrule.StatusStrategy},

		// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy and its binding (applied by
		// internal/admission's MutatingPolicies). Without an authorizer upstream's strategies do
		// not check the creator's access to the paramKind, as Kube's ValidatingAdmissionPolicy
		// does not.
		{group: "admissionregistration.k8s.io", version: "v1", kind: "MutatingAdmissionPolicy", resource: "mutatingadmissionpolicies", singular: "mutatingadmissionpolicy",
			categories: []string{"api-extensions"}, strategy: mutatingadmissionpolicy.NewStrategy(nil, noResolver)},
		{group: "admissionregistration.k8s.io", version: "v1", kind: "MutatingAdmissionPolicyBinding", resource: "mutatingadmissionpolicybindings", singular: "mutatingadmissionpolicybinding",
			categories: []string{"api-extensions"}, strategy: mutatingadmissionpolicybinding.NewStrategy(nil, nil, noResolver)},

		// flowcontrol.apiserver.k8s.io/v1 (API priority and fairness configuration; the
		// mandatory and suggested objects are kept by internal/server's flowcontrol.go)
		{group: "flowcontrol.apiserver.k8s.io", version: "v1", kind: "FlowSchema", resource: "flowschemas", singular: "flowschema",
			strategy: flowschema.Strategy, status: flowschema.StatusStrategy},
		{group: "flowcontrol.apiserver.k8s.io", version: "v1", kind: "PriorityLevelConfiguration", resource: "prioritylevelconfigurations", singular: "prioritylevelconfiguration",
			strategy: prioritylevelconfiguration.Strategy, status: prioritylevelconfiguration.StatusStrategy},

		// apiregistration.k8s.io/v1 (kube-aggregator's APIService; the local ones for every
		// served group-version are kept by internal/controllers/apiservice)
		{group: "apiregistration.k8s.io", version: "v1", kind: "APIService", resource: "apiservices", singular: "apiservice",
			categories: []string{"api-extensions"}, strategy: apiservice.NewStrategy(scheme), status: apiservice.NewStatusStrategy(scheme)},

		// storagemigration.k8s.io/v1 (kube-controller-manager's storage version migrator)
		{group: "storagemigration.k8s.io", version: "v1", kind: "StorageVersionMigration", resource: "storageversionmigrations", singular: "storageversionmigration",
			strategy: storagemigration.Strategy, status: storagemigration.StatusStrategy},

		// certificates.k8s.io/v1
		{group: "certificates.k8s.io", version: "v1", kind: "ClusterTrustBundle", resource: "clustertrustbundles", singular: "clustertrustbundle", strategy: clustertrustbundle.Strategy,
			fields: func(o map[string]any, f fields.Set) { f["spec.signerName"] = strField(o, "spec", "signerName") }},
		{group: "certificates.k8s.io", version: "v1", kind: "PodCertificateRequest", resource: "podcertificaterequests", singular: "podcertificaterequest", namespaced: true,
			strategy: podCertificateRequests, status: podcertificaterequest.NewStatusStrategy(podCertificateRequests, signerAuthorizer{}, clock.RealClock{}),
			fields: func(o map[string]any, f fields.Set) {
				f["spec.signerName"] = strField(o, "spec", "signerName")
				f["spec.podName"] = strField(o, "spec", "podName")
				f["spec.nodeName"] = strField(o, "spec", "nodeName")
			}},
		{group: "certificates.k8s.io", version: "v1", kind: "CertificateSigningRequest", resource: "certificatesigningrequests", singular: "certificatesigningrequest", short: []string{"csr"},
			strategy: certificates.Strategy, status: certificates.StatusStrategy,
			fieldSubs: map[string]fieldSub{"approval": {certificates.ApprovalStrategy, [][]string{{"status", "conditions"}}}},
			fields:    func(o map[string]any, f fields.Set) { f["spec.signerName"] = strField(o, "spec", "signerName") }},
	}
}

// podCertificateRequests is upstream's strategy for PodCertificateRequests; their status is
// written by signers, which signerAuthorizer vouches for (see there).
var podCertificateRequests = podcertificaterequest.NewStrategy()

// claimStrategy checks adminAccess against namespaces' labels through namespaces.
// noResolver stands in for upstream's discovery resolver of paramKinds, which only its
// (here absent) authorization of the paramKind uses.
var noResolver = resolver.ResourceResolverFunc(func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	return schema.GroupVersionResource{}, fmt.Errorf("paramKind %s is not resolved", gvk)
})

var claimStrategy = resourceclaim.NewStrategy(namespaces, nil)

// Kinds returns a fresh definition of every workload kind.
func Kinds() []*registry.Kind {
	ds := defs()
	out := make([]*registry.Kind, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.build())
	}
	return out
}

func (d def) build() *registry.Kind {
	gvk := schema.GroupVersionKind{Group: d.group, Version: d.version, Kind: d.kind}
	newObj := func() runtime.Object { o, _ := scheme.New(gvk); return o }
	newList := func() runtime.Object { o, _ := scheme.New(gvk.GroupVersion().WithKind(d.kind + "List")); return o }
	k := registry.TypedKind(d.group, d.version, d.resource, d.singular, newObj, newList)
	k.ShortNames, k.Categories, k.Namespaced = d.short, d.categories, d.namespaced
	st := &strategy{gvk: gvk, gvr: gvk.GroupVersion().WithResource(d.resource), goType: reflect.TypeOf(newObj()).Elem(), create: d.strategy, update: d.strategy,
		subresources: map[string]rest.RESTUpdateStrategy{}}
	if g, ok := d.strategy.(rest.RESTGracefulDeleteStrategy); ok {
		st.graceful = g
	}
	if d.status != nil {
		k.Status = true
		st.subresources["status"] = d.status
	}
	if len(d.fieldSubs) > 0 {
		k.FieldSubresources = map[string]*registry.FieldSubresource{}
		for name, fs := range d.fieldSubs {
			st.subresources[name] = fs.strategy
			k.FieldSubresources[name] = &registry.FieldSubresource{Fields: fs.fields}
		}
	}
	k.Strategy = st
	k.Scale = d.scale
	k.Connect = d.connect
	k.IndexedFields = d.indexed
	k.TableRows = tableRows(gvk)
	if d.fields != nil {
		extra := d.fields
		k.Attrs = func(obj *unstructured.Unstructured) (labels.Set, fields.Set) {
			l, f := storage.DefaultAttrs(obj)
			extra(obj.Object, f)
			return l, f
		}
	}
	if d.storageVersion != "" {
		from := gvk.GroupKind().WithVersion(d.storageVersion)
		k.StorageVersion = d.storageVersion
		k.FromStorage = convertFrom(from, gvk)
		k.ToStorage = convertTo(gvk, from)
	}
	return &k
}

func replicasScale() *registry.Scale {
	return &registry.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", Selector: labelSelector}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// strField, boolField and intField read a field without copying what holds it (they run
// for every object the watch cache takes in).
func strField(o map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(o, path...)
	return s
}

func boolField(o map[string]any, path ...string) string {
	b, _, _ := unstructured.NestedBool(o, path...)
	return strconv.FormatBool(b)
}

func intField(o map[string]any, path ...string) string {
	n, _, _ := unstructured.NestedInt64(o, path...)
	return strconv.FormatInt(n, 10)
}

// nameField is the legacy "name" field selector of persistent volumes and claims.
func nameField(o map[string]any, f fields.Set) { f["name"] = strField(o, "metadata", "name") }

// podFields are upstream's selectable pod fields (pod.ToSelectableFields), read without
// decoding the pod: every pod in the watch cache has them computed.
func podFields(o map[string]any, f fields.Set) {
	f["spec.nodeName"] = strField(o, "spec", "nodeName")
	f["spec.restartPolicy"] = strField(o, "spec", "restartPolicy")
	f["spec.schedulerName"] = strField(o, "spec", "schedulerName")
	f["spec.serviceAccountName"] = strField(o, "spec", "serviceAccountName")
	f["spec.hostNetwork"] = boolField(o, "spec", "hostNetwork")
	f["status.phase"] = strField(o, "status", "phase")
	ip := ""
	if ips, _, _ := unstructured.NestedFieldNoCopy(o, "status", "podIPs"); len(asSlice(ips)) > 0 {
		ips := asSlice(ips)
		if m, ok := ips[0].(map[string]any); ok {
			ip, _ = m["ip"].(string)
		}
	}
	f["status.podIP"] = ip
	f["status.nominatedNodeName"] = strField(o, "status", "nominatedNodeName")
}
