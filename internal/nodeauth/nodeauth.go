package nodeauth

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	certinformersv1 "k8s.io/client-go/informers/certificates/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"kubeos.dev/kube/internal/apiserver/filters"
	"kubeos.dev/kube/internal/apiserver/request"
)

// Name is the authorizer's name in reasons, as kube-apiserver's --authorization-mode names
// it ("node: no relationship found between node 'n1' and this object").
const Name = "node"

// Authorizer is upstream's Node authorizer over a graph of the cluster's pods and volumes.
// The zero value is not usable; use New.
type Authorizer struct {
	graph *node.Graph
	authz *node.NodeAuthorizer
	log   *slog.Logger
}

var _ filters.Authorizer = (*Authorizer)(nil)

// New returns a Node authorizer with an empty graph; Start feeds it. log may be nil.
func New(log *slog.Logger) *Authorizer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := node.NewGraph()
	return &Authorizer{graph: g, authz: node.NewAuthorizer(g, nodeidentifier.NewDefaultNodeIdentifier(), bootstrappolicy.NodeRules()), log: log}
}

// Graph is the authorizer's graph. Start keeps it; tests may feed it by hand (AddPod, AddPV).
func (a *Authorizer) Graph() *node.Graph { return a.graph }

// Decide asks upstream's authorizer. It allows or has no opinion, never denies; reason
// says why not when it has no opinion on a node's request.
func (a *Authorizer) Decide(ctx context.Context, attrs authorizer.Attributes) (allowed bool, reason string) {
	d, reason, err := a.authz.Authorize(ctx, attrs)
	if err != nil && reason == "" {
		reason = err.Error()
	}
	return d == authorizer.DecisionAllow, reason
}

// Authorize implements filters.Authorizer: true when the Node authorizer allows, else false
// with its reason (empty for users that are not nodes). Compose it with RBAC through Union.
func (a *Authorizer) Authorize(ctx context.Context, u *request.User, info *request.Info) (bool, string) {
	return a.Decide(ctx, Attributes(u, info, selectorsOf(info)))
}

// Selectors are a request's raw fieldSelector and labelSelector query parameters, which
// upstream's RequestInfo carries for list, watch and deletecollection (a node may list and
// watch pods only with fieldSelector spec.nodeName=<itself>).
type Selectors struct{ Field, Label string }

// selectorsOf is where the request's selectors come from: request.Parse keeps them for
// list, watch and deletecollection, as upstream's RequestInfoFactory does.
func selectorsOf(info *request.Info) Selectors {
	return Selectors{Field: info.FieldSelector, Label: info.LabelSelector}
}

// Attributes adapts a request to upstream's authorizer.Attributes, as kube-apiserver's
// GetAuthorizerAttributes builds them from its RequestInfo: selectors are parsed (a parse
// error is kept in the record, as upstream keeps it), and a list or watch with an exact
// metadata.name field selector names that object, as upstream's RequestInfoFactory does.
func Attributes(u *request.User, info *request.Info, sel Selectors) authorizer.AttributesRecord {
	a := authorizer.AttributesRecord{
		ResourceRequest: info.IsResourceRequest,
		Path:            info.Path,
		Verb:            info.Verb,
		APIGroup:        info.APIGroup,
		APIVersion:      info.APIVersion,
		Resource:        info.Resource,
		Subresource:     info.Subresource,
		Namespace:       info.Namespace,
		Name:            info.AuthzName(),
	}
	if u != nil {
		a.User = &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	}
	if !info.IsResourceRequest {
		return a
	}
	switch info.Verb {
	case "list", "watch", "deletecollection":
	default:
		return a
	}
	if sel.Field != "" {
		fs, err := fields.ParseSelector(sel.Field)
		if err != nil {
			a.FieldSelectorParsingErr = err
		} else {
			if reqs := fs.Requirements(); len(reqs) > 0 {
				a.FieldSelectorRequirements = reqs
			}
			if name, ok := fs.RequiresExactMatch("metadata.name"); ok && a.Name == "" && info.Verb != "deletecollection" && validPathName(name) {
				a.Name = name
			}
		}
	}
	if sel.Label != "" {
		ls, err := labels.Parse(sel.Label)
		if err != nil {
			a.LabelSelectorParsingErr = err
		} else if reqs, _ := ls.Requirements(); len(reqs) > 0 {
			a.LabelSelectorRequirements = reqs
		}
	}
	return a
}

// validPathName is apimachinery's path-segment rule (content.IsPathSegmentName): a name
// that could not be a path segment never names an object.
func validPathName(name string) bool {
	if name == "." || name == ".." || name == "" {
		return false
	}
	for _, c := range name {
		if c == '/' || c == '%' {
			return false
		}
	}
	return true
}

// Start keeps the graph current from informers over cs (a loopback client that may list
// and watch pods, persistentvolumes, volumeattachments, resourceslices and
// podcertificaterequests) until ctx ends. It first waits until the server serves pods,
// persistentvolumes and volumeattachments (discovery, polled every 2 s meanwhile).
func (a *Authorizer) Start(ctx context.Context, cs kubernetes.Interface) error {
	return a.start(ctx, cs, 2*time.Second)
}

var (
	podsGR         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pvsGR          = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	attachmentsGR  = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}
	slicesGR       = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}
	certRequestsGR = schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"}
	requiredServed = []schema.GroupVersionResource{podsGR, pvsGR, attachmentsGR}
	optionalServed = []schema.GroupVersionResource{slicesGR, certRequestsGR}
)

func (a *Authorizer) start(ctx context.Context, cs kubernetes.Interface, poll time.Duration) error {
	var served map[schema.GroupVersionResource]bool
	waiting := false
	for {
		served = servedResources(cs, append(append([]schema.GroupVersionResource{}, requiredServed...), optionalServed...))
		missing := []string{}
		for _, gvr := range requiredServed {
			if !served[gvr] {
				missing = append(missing, gvr.String())
			}
		}
		if len(missing) == 0 {
			break
		}
		if !waiting {
			a.log.Info("node authorizer waits for the workload kinds before it feeds its graph", "missing", missing)
			waiting = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(trimPod))
	var slices resourceinformers.ResourceSliceInformer
	if served[slicesGR] {
		slices = f.Resource().V1().ResourceSlices()
	}
	var pcrs certinformersv1.PodCertificateRequestInformer
	if served[certRequestsGR] {
		pcrs = f.Certificates().V1().PodCertificateRequests()
	}
	node.AddGraphEventHandlers(a.graph, f.Core().V1().Nodes(), f.Core().V1().Pods(), f.Core().V1().PersistentVolumes(),
		f.Storage().V1().VolumeAttachments(), slices, pcrs)
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("node authorizer: %v did not sync", typ)
		}
	}
	a.log.Info("node authorizer graph synced")
	<-ctx.Done()
	f.Shutdown()
	return nil
}

// servedResources reports which of want the server serves (discovery per group version;
// a group version it cannot read counts as not served).
func servedResources(cs kubernetes.Interface, want []schema.GroupVersionResource) map[schema.GroupVersionResource]bool {
	out := map[schema.GroupVersionResource]bool{}
	lists := map[schema.GroupVersion][]string{}
	for _, gvr := range want {
		gv := gvr.GroupVersion()
		names, ok := lists[gv]
		if !ok {
			if l, err := cs.Discovery().ServerResourcesForGroupVersion(gv.String()); err == nil {
				for _, r := range l.APIResources {
					names = append(names, r.Name)
				}
			}
			lists[gv] = names
		}
		for _, n := range names {
			if n == gvr.Resource {
				out[gvr] = true
			}
		}
	}
	return out
}
